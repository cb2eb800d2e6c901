//! Each run's history, kept across restarts in one SQLite file,
//! `<data_dir>/history.sqlite`: its settings, its stats series (the dashboard's
//! curves), its finished episodes and each model's evaluation record. A restarted
//! manager loads each run's last samples and episodes back, so the curves go on where
//! they stopped; a deleted run's history stays, so a finished experiment can still be
//! compared (`GET /api/v1/history`).
//!
//! Why SQLite (through `rusqlite`, with SQLite compiled in): one file, crash-safe
//! transactions, queries by run and time without a server, and a format every tool
//! reads (`sqlite3 data/history.sqlite`). The series are small (a sample every 2 s is
//! 43,200 rows a day per run), so an embedded database is plenty.
//!
//! Off the request path: handlers and the sampler hand records to [`History::record`],
//! which never blocks (a bounded channel; when it is full the record is dropped and
//! counted, and the log says so once). One thread owns the connection and writes what
//! arrived every second in one transaction. Retention: `[history]` keeps the newest
//! `samples_per_run` samples and `episodes_per_run` episodes of each run; older ones are
//! deleted once a minute.
//!
//! A file SQLite cannot open (corrupt) is moved aside (`history.sqlite.corrupt-<unix
//! time>`) and a new one started: the history is a convenience, never a reason not to
//! train.

use crate::dashboard::series::Sample;
use anyhow::Context;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use shine_agent::durable::unix_now;
use shine_agent::protocol::EpisodeReport;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The `[history]` section of `configs/manager.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Stats samples kept per run, newest first (100,000: 55 hours at 2 s).
    pub samples_per_run: u64,
    /// Finished episodes kept per run.
    pub episodes_per_run: u64,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig { samples_per_run: 100_000, episodes_per_run: 100_000 }
    }
}

/// Records waiting for the writer before new ones are dropped.
const QUEUE: usize = 10_000;
/// How often the writer commits what arrived.
const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// How often old rows are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What is written.
#[derive(Debug, Clone)]
pub enum Record {
    /// A run opened (or created): its settings as JSON.
    Run {
        run: String,
        settings: String,
    },
    /// A run was deleted: its history stays, marked with the time.
    Deleted {
        run: String,
    },
    Sample {
        run: String,
        sample: Box<Sample>,
    },
    Episodes {
        run: String,
        episodes: Vec<EpisodeReport>,
    },
    /// Evaluation episodes played with a model: added to its record.
    Eval {
        run: String,
        version: u64,
        episodes: u64,
        survived: u64,
    },
}

/// A run the history knows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    pub name: String,
    /// Its settings when it last opened (JSON, as `GET /api/v1/runs` shows them).
    pub settings: serde_json::Value,
    pub first_seen_unix: f64,
    /// When it was deleted (null: it has not been).
    pub deleted_unix: Option<f64>,
    pub samples: u64,
}

/// A model's evaluation record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalRecord {
    pub version: u64,
    pub episodes: u64,
    pub survived: u64,
}

pub struct History {
    path: PathBuf,
    tx: Mutex<Option<SyncSender<Record>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    dropped: AtomicU64,
    warned: AtomicBool,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    name TEXT PRIMARY KEY,
    settings TEXT NOT NULL,
    first_seen REAL NOT NULL,
    deleted REAL
);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL,
    t REAL NOT NULL,
    sample TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_run ON samples (run, id);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL,
    t REAL NOT NULL,
    eval INTEGER NOT NULL,
    episode TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_run ON episodes (run, eval, id);
CREATE TABLE IF NOT EXISTS evals (
    run TEXT NOT NULL,
    version INTEGER NOT NULL,
    episodes INTEGER NOT NULL,
    survived INTEGER NOT NULL,
    PRIMARY KEY (run, version)
);
CREATE TABLE IF NOT EXISTS league_matches (
    id INTEGER PRIMARY KEY,
    t REAL NOT NULL,
    match TEXT NOT NULL
);
";

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    // WAL: readers (a restart's loads, the API) never wait for the writer; NORMAL:
    // a commit survives a crash of the process (an OS crash may lose the last second).
    c.pragma_update(None, "journal_mode", "WAL")?;
    c.pragma_update(None, "synchronous", "NORMAL")?;
    c.busy_timeout(Duration::from_secs(5))?;
    c.execute_batch(SCHEMA)?;
    Ok(c)
}

impl History {
    /// Open (creating) `<data_dir>/history.sqlite` and start its writer.
    pub fn open(data_dir: &Path, cfg: HistoryConfig) -> anyhow::Result<History> {
        let path = data_dir.join("history.sqlite");
        let conn = match connect(&path) {
            Ok(c) => c,
            Err(e) => {
                let aside = data_dir.join(format!("history.sqlite.corrupt-{}", unix_now() as u64));
                tracing::error!(error = %e, path = %path.display(), aside = %aside.display(), "the history database does not open; moving it aside and starting a new one");
                std::fs::rename(&path, &aside).with_context(|| format!("moving {} aside", path.display()))?;
                for ext in ["-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
                }
                connect(&path).with_context(|| format!("creating {}", path.display()))?
            }
        };
        let (tx, rx) = sync_channel(QUEUE);
        let thread = std::thread::Builder::new().name("shine-history".into()).spawn(move || write_loop(conn, rx, cfg))?;
        Ok(History { path, tx: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)), dropped: AtomicU64::new(0), warned: AtomicBool::new(false) })
    }

    /// Hand a record to the writer; never blocks.
    pub fn record(&self, r: Record) {
        let tx = self.tx.lock().expect("history lock");
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(r) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!("the history writer cannot keep up (or has stopped): records are being dropped (the curves will have gaps)");
                }
            }
        }
    }

    /// Records dropped because the writer could not keep up.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Write what is queued and stop the writer (shutdown).
    pub fn close(&self) {
        self.tx.lock().expect("history lock").take();
        if let Some(t) = self.thread.lock().expect("history lock").take() {
            if t.join().is_err() {
                tracing::error!("the history writer panicked");
            }
        }
    }

    fn read(&self) -> anyhow::Result<Connection> {
        let c = Connection::open_with_flags(&self.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        c.busy_timeout(Duration::from_secs(5))?;
        Ok(c)
    }

    /// `run`'s newest `limit` samples, oldest first.
    pub fn samples(&self, run: &str, limit: usize) -> anyhow::Result<Vec<Sample>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT sample FROM (SELECT id, sample FROM samples WHERE run = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id")?;
        let rows = q.query_map(params![run, limit as i64], |r| r.get::<_, String>(0))?;
        rows.map(|s| Ok(serde_json::from_str(&s?)?)).collect()
    }

    /// `run`'s samples after `since` (unix time), at most `max_points` of them evenly
    /// spread over the range (every k-th), oldest first.
    pub fn series(&self, run: &str, since: f64, max_points: usize) -> anyhow::Result<Vec<Sample>> {
        let c = self.read()?;
        let n: i64 = c.query_row("SELECT count(*) FROM samples WHERE run = ?1 AND t > ?2", params![run, since], |r| r.get(0))?;
        let every = (n as usize).div_ceil(max_points.max(1)).max(1) as i64;
        let mut q = c.prepare(
            "SELECT sample FROM (SELECT sample, id, row_number() OVER (ORDER BY id) AS k FROM samples WHERE run = ?1 AND t > ?2) \
             WHERE (k - 1) % ?3 = 0 ORDER BY id",
        )?;
        let rows = q.query_map(params![run, since, every], |r| r.get::<_, String>(0))?;
        rows.map(|s| Ok(serde_json::from_str(&s?)?)).collect()
    }

    /// `run`'s newest `limit` training (or evaluation) episodes, oldest first.
    pub fn episodes(&self, run: &str, eval: bool, limit: usize) -> anyhow::Result<Vec<EpisodeReport>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT episode FROM (SELECT id, episode FROM episodes WHERE run = ?1 AND eval = ?2 ORDER BY id DESC LIMIT ?3) ORDER BY id")?;
        let rows = q.query_map(params![run, eval, limit as i64], |r| r.get::<_, String>(0))?;
        rows.map(|s| Ok(serde_json::from_str(&s?)?)).collect()
    }

    /// Every model's evaluation record of `run`, by version.
    pub fn evals(&self, run: &str) -> anyhow::Result<Vec<EvalRecord>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT version, episodes, survived FROM evals WHERE run = ?1 ORDER BY version")?;
        let rows = q.query_map(params![run], |r| {
            Ok(EvalRecord { version: r.get::<_, i64>(0)? as u64, episodes: r.get::<_, i64>(1)? as u64, survived: r.get::<_, i64>(2)? as u64 })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every run the history knows, by name (deleted ones too).
    pub fn runs(&self) -> anyhow::Result<Vec<RunRecord>> {
        let c = self.read()?;
        let mut q =
            c.prepare("SELECT name, settings, first_seen, deleted, (SELECT count(*) FROM samples s WHERE s.run = runs.name) FROM runs ORDER BY name")?;
        let rows =
            q.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, f64>(2)?, r.get::<_, Option<f64>>(3)?, r.get::<_, i64>(4)?)))?;
        rows.map(|row| {
            let (name, settings, first_seen_unix, deleted_unix, samples) = row?;
            Ok(RunRecord {
                name,
                settings: serde_json::from_str(&settings).unwrap_or(serde_json::Value::Null),
                first_seen_unix,
                deleted_unix,
                samples: samples as u64,
            })
        })
        .collect()
    }

    /// Store one league match now, in its own transaction (blocking): unlike the other
    /// records, a league result is answered only once it is kept.
    pub fn record_match(&self, m: &crate::league::Recorded) -> anyhow::Result<()> {
        let c = connect(&self.path)?;
        c.execute("INSERT INTO league_matches (t, match) VALUES (?1, ?2)", params![m.t, serde_json::to_string(m)?])?;
        Ok(())
    }

    /// Every stored league match, in the order they were stored.
    pub fn league_matches(&self) -> anyhow::Result<Vec<crate::league::Recorded>> {
        let c = self.read()?;
        let mut q = c.prepare("SELECT match FROM league_matches ORDER BY id")?;
        let rows = q.query_map([], |r| r.get::<_, String>(0))?;
        rows.map(|s| Ok(serde_json::from_str(&s?)?)).collect()
    }

    /// Whether the history knows `run`.
    pub fn knows(&self, run: &str) -> anyhow::Result<bool> {
        let c = self.read()?;
        Ok(c.query_row("SELECT 1 FROM runs WHERE name = ?1", params![run], |_| Ok(())).optional()?.is_some())
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_loop(mut conn: Connection, rx: Receiver<Record>, cfg: HistoryConfig) {
    let mut last_prune = Instant::now();
    let mut open = true;
    while open {
        let mut batch = Vec::new();
        let deadline = Instant::now() + COMMIT_EVERY;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(r) => batch.push(r),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        if !batch.is_empty() {
            if let Err(e) = write(&mut conn, &batch) {
                tracing::error!(error = %e, records = batch.len(), "could not write to the history database; these records are lost");
            }
        }
        if last_prune.elapsed() >= PRUNE_EVERY || !open {
            if let Err(e) = prune(&conn, &cfg) {
                tracing::warn!(error = %e, "could not prune the history database");
            }
            last_prune = Instant::now();
        }
    }
}

fn write(conn: &mut Connection, batch: &[Record]) -> anyhow::Result<()> {
    let t = unix_now();
    let tx = conn.transaction()?;
    for r in batch {
        match r {
            Record::Run { run, settings } => {
                tx.execute(
                    "INSERT INTO runs (name, settings, first_seen, deleted) VALUES (?1, ?2, ?3, NULL) \
                     ON CONFLICT (name) DO UPDATE SET settings = excluded.settings, deleted = NULL",
                    params![run, settings, t],
                )?;
            }
            Record::Deleted { run } => {
                tx.execute("UPDATE runs SET deleted = ?2 WHERE name = ?1", params![run, t])?;
            }
            Record::Sample { run, sample } => {
                tx.execute("INSERT INTO samples (run, t, sample) VALUES (?1, ?2, ?3)", params![run, sample.t, serde_json::to_string(sample)?])?;
            }
            Record::Episodes { run, episodes } => {
                let mut q = tx.prepare_cached("INSERT INTO episodes (run, t, eval, episode) VALUES (?1, ?2, ?3, ?4)")?;
                for e in episodes {
                    q.execute(params![run, t, e.eval, serde_json::to_string(e)?])?;
                }
            }
            Record::Eval { run, version, episodes, survived } => {
                tx.execute(
                    "INSERT INTO evals (run, version, episodes, survived) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (run, version) DO UPDATE SET episodes = episodes + excluded.episodes, survived = survived + excluded.survived",
                    params![run, *version as i64, *episodes as i64, *survived as i64],
                )?;
            }
        }
    }
    tx.commit()?;
    Ok(())
}

/// Keep each run's newest rows within the limits.
fn prune(conn: &Connection, cfg: &HistoryConfig) -> rusqlite::Result<()> {
    for (table, keep) in [("samples", cfg.samples_per_run), ("episodes", cfg.episodes_per_run)] {
        conn.execute(
            &format!(
                "DELETE FROM {table} WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY run{by} ORDER BY id DESC) AS k FROM {table}) WHERE k > ?1)",
                // Training and evaluation episodes each keep their newest.
                by = if table == "episodes" { ", eval" } else { "" }
            ),
            params![keep as i64],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, steps: u64) -> Sample {
        Sample { t, train_steps: steps, eval_survival: Some(0.5), ..Default::default() }
    }

    fn episode(reward: f64, eval: bool) -> EpisodeReport {
        EpisodeReport { frames: 3600, reward, survived: true, eval, cpu_level: 9, model_version: 3 }
    }

    #[test]
    fn what_is_recorded_is_there_after_a_reopen_and_retention_keeps_the_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let h = History::open(tmp.path(), HistoryConfig { samples_per_run: 50, episodes_per_run: 3 }).unwrap();
        h.record(Record::Run { run: "a".into(), settings: "{\"weight\":1.0}".into() });
        h.record(Record::Run { run: "b".into(), settings: "{}".into() });
        for i in 0..80 {
            h.record(Record::Sample { run: "a".into(), sample: Box::new(sample(1000.0 + i as f64, i)) });
        }
        h.record(Record::Sample { run: "b".into(), sample: Box::new(sample(5000.0, 7)) });
        h.record(Record::Episodes { run: "a".into(), episodes: (0..5).map(|i| episode(i as f64, false)).chain([episode(9.0, true)]).collect() });
        h.record(Record::Eval { run: "a".into(), version: 3, episodes: 2, survived: 1 });
        h.record(Record::Eval { run: "a".into(), version: 3, episodes: 4, survived: 4 });
        h.record(Record::Deleted { run: "b".into() });
        h.close();
        drop(h);

        let h = History::open(tmp.path(), HistoryConfig { samples_per_run: 50, episodes_per_run: 3 }).unwrap();
        let a = h.samples("a", 1000).unwrap();
        let steps: Vec<u64> = a.iter().map(|s| s.train_steps).collect();
        assert_eq!(steps, (30..80).collect::<Vec<_>>(), "the newest 50, oldest first");
        assert_eq!(a[0], sample(1030.0, 30), "a sample comes back as it went in");
        assert_eq!(h.samples("a", 2).unwrap().iter().map(|s| s.train_steps).collect::<Vec<_>>(), [78, 79]);
        assert_eq!(h.samples("b", 10).unwrap().len(), 1, "retention is per run");
        let rewards: Vec<f64> = h.episodes("a", false, 100).unwrap().iter().map(|e| e.reward).collect();
        assert_eq!(rewards, [2.0, 3.0, 4.0], "the newest training episodes");
        assert_eq!(h.episodes("a", true, 100).unwrap(), [episode(9.0, true)], "evaluation episodes are kept apart");
        assert_eq!(h.evals("a").unwrap(), [EvalRecord { version: 3, episodes: 6, survived: 5 }], "evaluations add up");
        let runs = h.runs().unwrap();
        assert_eq!(runs.iter().map(|r| (r.name.as_str(), r.deleted_unix.is_some(), r.samples)).collect::<Vec<_>>(), [("a", false, 50), ("b", true, 1)]);
        assert_eq!(runs[0].settings["weight"], 1.0);
        // A thinned series: every k-th of the range, at most max_points.
        let thin = h.series("a", 1039.5, 10).unwrap();
        assert_eq!(thin.iter().map(|s| s.train_steps).collect::<Vec<_>>(), [40, 44, 48, 52, 56, 60, 64, 68, 72, 76]);
        assert!(h.knows("b").unwrap() && !h.knows("c").unwrap());
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_and_a_new_one_started() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("history.sqlite"), vec![0x5a; 8192]).unwrap();
        let h = History::open(tmp.path(), HistoryConfig::default()).unwrap();
        h.record(Record::Sample { run: "a".into(), sample: Box::new(sample(1.0, 1)) });
        h.close();
        assert_eq!(h.samples("a", 10).unwrap().len(), 1);
        let aside: Vec<String> =
            std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.contains("corrupt")).collect();
        assert_eq!(aside.len(), 1, "the damaged file is kept aside: {aside:?}");
    }
}
