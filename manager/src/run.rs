//! Runs: the experiments one manager trains side by side. Each has its own settings,
//! replay, learner and rate limiter (on the shared [`crate::device::Device`]), model
//! registry, checkpoint, write-ahead log, upload-id window, episode log and stats
//! series, all under `<data_dir>/runs/<name>/`:
//!
//! ```text
//! <data_dir>/runs/<name>/checkpoint/   the learner (crate::checkpoint)
//!                        models/       published models (crate::registry)
//!                        wal/          accepted uploads (crate::wal)
//!                        run.toml      the run's [[runs]] entry, for runs created
//!                                      through the API (declared runs live in the config)
//!                        state.toml    paused or not, as last set through the API
//! <data_dir>/deleted/<name>-<unix time>/   a run deleted through the API, kept
//! ```
//!
//! A data directory from before runs (`checkpoint/`, `models/`, `wal/` at its top) is
//! moved into `runs/default/` on the first start ([`migrate_legacy`]); each move is one
//! rename, so a start interrupted half-way finishes the moves the next time.

use crate::config::{Config, RunSettings, RunSpec, DEFAULT_RUN};
use crate::device::Device;
use crate::history::{History, Record};
use crate::registry::Registry;
use crate::state::Dedup;
use crate::stats::{EpisodeLog, Series};
use crate::device::RunHandle;
use crate::registry::Published;
use crate::trainer::{self, Restore, RunSetup};
use crate::wal::{self, Wal};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use shine_agent::durable::write_atomic;
use shine_agent::experience::Expect;
use shine_agent::{ActionSet, Task};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Where a run was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `[[runs]]` in the config file (or the implicit `default`): changed there.
    Config,
    /// `POST /api/v1/runs`: kept in the run's `run.toml`, deletable through the API.
    Api,
}

/// One run of the manager.
pub struct Run {
    pub name: String,
    pub source: Source,
    /// The entry it was made from (what `GET /api/v1/runs` shows as asked for).
    pub spec: RunSpec,
    /// The resolved settings.
    pub settings: RunSettings,
    pub action_set: ActionSet,
    pub task: Task,
    /// What every upload must satisfy beyond the format.
    pub expect: Expect,
    pub dir: PathBuf,
    /// Where an upload is made durable before its 202.
    pub wal: Wal,
    /// The run's side of the device thread (queue, stats, pause).
    pub trainer: RunHandle,
    pub registry: Arc<Registry>,
    /// Held across check, ingest and insert so that two concurrent copies of one
    /// upload cannot both get in.
    pub dedup: Mutex<Dedup>,
    pub episodes: Mutex<EpisodeLog>,
    pub series: Mutex<Series>,
    /// Age of the accepted experience: the sum over transitions of how many model
    /// versions behind the latest each was played, and how many transitions that sums.
    /// Counters only (the sampler takes differences): `stats::Sample::data_age`.
    pub age_sum: AtomicU64,
    pub age_count: AtomicU64,
}

pub fn runs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("runs")
}

pub fn run_dir(data_dir: &Path, name: &str) -> PathBuf {
    runs_dir(data_dir).join(name)
}

/// What a data directory from before runs holds at its top.
const LEGACY: [&str; 3] = ["checkpoint", "models", "wal"];

/// Move a pre-runs data directory's `checkpoint/`, `models/` and `wal/` into
/// `runs/default/`. Returns whether anything moved.
pub fn migrate_legacy(data_dir: &Path) -> anyhow::Result<bool> {
    let to = run_dir(data_dir, DEFAULT_RUN);
    let mut moved = false;
    for name in LEGACY {
        let from = data_dir.join(name);
        if !from.exists() {
            continue;
        }
        if to.join(name).exists() {
            anyhow::bail!(
                "{} and {} both exist: the data directory holds a run from before runs and the run {DEFAULT_RUN:?} alike; move one of them away",
                from.display(),
                to.join(name).display()
            );
        }
        std::fs::create_dir_all(&to).with_context(|| format!("creating {}", to.display()))?;
        std::fs::rename(&from, to.join(name)).with_context(|| format!("moving {} into {}", from.display(), to.display()))?;
        moved = true;
    }
    if moved {
        tracing::info!(from = %data_dir.display(), to = %to.display(), "moved the data of the run from before runs into the run \"default\"");
    }
    Ok(moved)
}

/// `run.toml`: the entry of a run created through the API.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    run: RunSpec,
}

/// `state.toml`: what the API changed about a run.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    paused: bool,
}

/// The runs to open: the config's (or `default`), then those created through the API
/// in an earlier life of this data directory, by name.
pub fn discover(config: &Config) -> anyhow::Result<Vec<(RunSpec, Source)>> {
    let declared: Vec<RunSpec> = if config.runs.is_empty() { vec![RunSpec { name: DEFAULT_RUN.into(), ..RunSpec::empty() }] } else { config.runs.clone() };
    let mut out: Vec<(RunSpec, Source)> = declared.into_iter().map(|s| (s, Source::Config)).collect();
    let dir = runs_dir(&config.server.data_dir);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(out) };
    let mut stored = Vec::new();
    for e in entries {
        let path = e?.path().join("run.toml");
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let s: Stored = toml::from_str(&text).with_context(|| format!("parsing {} (a run created through the API; fix or delete the file)", path.display()))?;
        if out.iter().any(|(d, _)| d.name == s.run.name) {
            tracing::warn!(run = %s.run.name, path = %path.display(), "the config declares this run too: its [[runs]] entry wins");
            continue;
        }
        stored.push((s.run, Source::Api));
    }
    stored.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    out.extend(stored);
    Ok(out)
}

impl Run {
    /// Open the run: its directories, write-ahead log recovery, registry, and its
    /// trainer on `device`. Blocking (file I/O, libtorch).
    pub fn open(spec: RunSpec, source: Source, config: &Config, device: &Device, history: &History) -> anyhow::Result<Run> {
        let settings = spec.resolve(config)?;
        let name = settings.name.clone();
        let dir = run_dir(&config.server.data_dir, &name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let paused = match std::fs::read_to_string(dir.join("state.toml")) {
            Ok(t) => toml::from_str::<State>(&t).with_context(|| format!("parsing {}", dir.join("state.toml").display()))?.paused,
            Err(_) => settings.paused,
        };
        let registry = Arc::new(Registry::open(&dir, config.registry.clone())?);
        let (action_set, task) = (settings.action_set(), settings.task());
        // The write-ahead log: what was acknowledged before a stop or a crash goes back
        // into the replay, and its upload ids into the dedup window.
        let expect = trainer::wire_expect(&settings.dqn, action_set);
        let meta = wal::WalMeta::new(action_set.name(), expect);
        let (recovered, wal) = wal::start(&dir.join("wal"), &config.wal, &meta, settings.replay.capacity, expect).with_context(|| format!("run {name:?}"))?;
        let mut dedup = Dedup::new(config.server.dedup_window);
        for id in &recovered.upload_ids {
            dedup.insert(*id);
        }
        let restore = Restore { data_dir: dir.clone(), rows: recovered.rows, highest_published: registry.highest_version() };
        let publish_to = registry.clone();
        let run_name = name.clone();
        let publish = move |m: Published| {
            let version = m.version;
            if let Err(e) = publish_to.publish(m) {
                tracing::error!(run = %run_name, version, error = format!("{e:#}"), "could not store a published model");
            }
        };
        let setup = RunSetup {
            name: name.clone(),
            weight: settings.weight,
            trainer: settings.trainer.clone(),
            replay: settings.replay.clone(),
            dqn: settings.dqn.clone(),
            actions: action_set,
            restore,
        };
        let client = device.add_run(setup, paused, publish).with_context(|| format!("run {name:?}"))?;
        // Kept for the next start only once it opened: a run that fails to open (its
        // directory holds a checkpoint of another action set) must not stop a restart.
        if source == Source::Api {
            let path = dir.join("run.toml");
            let stored = toml::to_string(&Stored { run: spec.clone() })
                .context("writing run.toml")
                .and_then(|text| write_atomic(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display())));
            if let Err(e) = stored {
                let _ = device.remove_run(&client);
                return Err(e);
            }
        }
        // The curves and episode windows go on where the last life of this run left them.
        let mut series = Series::new(config.stats.history);
        let mut episodes = EpisodeLog::new(config.stats.recent_episodes);
        let (samples, train, eval) = (
            history.samples(&name, config.stats.history),
            history.episodes(&name, false, config.stats.recent_episodes),
            history.episodes(&name, true, config.stats.recent_episodes),
        );
        match (samples, train, eval) {
            (Ok(samples), Ok(train), Ok(eval)) => {
                tracing::info!(run = %name, samples = samples.len(), episodes = train.len() + eval.len(), "history loaded");
                samples.into_iter().for_each(|s| series.push(s));
                train.into_iter().chain(eval).for_each(|e| episodes.preload(e));
            }
            (a, b, c) => {
                let e = a.err().or(b.err()).or(c.err()).expect("one failed");
                tracing::warn!(run = %name, error = format!("{e:#}"), "could not load the run's history; its curves start afresh");
            }
        }
        history.record(Record::Run { run: name.clone(), settings: serde_json::to_string(&settings).expect("plain settings") });
        tracing::info!(run = %name, action_set = action_set.name(), task = task.name(), paused, "run open");
        Ok(Run {
            name,
            source,
            spec,
            settings,
            action_set,
            task,
            expect,
            dir,
            wal,
            trainer: client,
            registry,
            dedup: Mutex::new(dedup),
            episodes: Mutex::new(episodes),
            series: Mutex::new(series),
            age_sum: Default::default(),
            age_count: Default::default(),
        })
    }

    /// Pause or resume training, remembered across restarts.
    pub fn set_paused(&self, paused: bool) -> anyhow::Result<()> {
        let text = toml::to_string(&State { paused }).expect("plain struct");
        let path = self.dir.join("state.toml");
        write_atomic(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
        self.trainer.set_paused(paused);
        tracing::info!(run = %self.name, paused, "run {}", if paused { "paused" } else { "resumed" });
        Ok(())
    }

    pub fn is_paused(&self) -> bool {
        self.trainer.is_paused()
    }
}

/// Where a deleted run's directory goes: `<data_dir>/deleted/<name>-<unix time>`.
pub fn deleted_dir(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("deleted").join(format!("{name}-{}", shine_agent::durable::unix_now() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_from_before_runs_moves_into_the_default_run() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        for name in LEGACY {
            std::fs::create_dir_all(d.join(name)).unwrap();
            std::fs::write(d.join(name).join("f"), name).unwrap();
        }
        // A start interrupted after the first move: the second finishes the rest.
        std::fs::create_dir_all(run_dir(d, DEFAULT_RUN)).unwrap();
        std::fs::rename(d.join("checkpoint"), run_dir(d, DEFAULT_RUN).join("checkpoint")).unwrap();
        assert!(migrate_legacy(d).unwrap());
        for name in LEGACY {
            assert!(!d.join(name).exists());
            assert_eq!(std::fs::read_to_string(run_dir(d, DEFAULT_RUN).join(name).join("f")).unwrap(), name);
        }
        assert!(!migrate_legacy(d).unwrap(), "nothing left to move");
        std::fs::create_dir_all(d.join("wal")).unwrap();
        let e = migrate_legacy(d).unwrap_err().to_string();
        assert!(e.contains("both exist"), "{e}");
    }
}
