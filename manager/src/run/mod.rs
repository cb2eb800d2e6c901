//! The run layer: a run's operations, below HTTP and above the device. A run is one
//! experiment of the manager, with its own settings, replay, learner and rate limiter
//! (on the shared [`crate::device::Device`]), model registry, checkpoint, write-ahead
//! log, upload-id window, episode log and stats series, all under
//! `<data_dir>/runs/<name>/` ([`store`]).
//!
//! - this file: [`Run`]: opening one ([`Run::open`]), taking an upload durably
//!   ([`Run::accept`]), pausing and resuming it; what the API reads of it.
//! - [`runs`]: [`Runs`], the manager's runs by name: creating and deleting them.
//! - [`store`]: its files on disk.
//! - [`dedup`]: the upload ids it accepted recently.
//!
//! An upload's way through [`Run::accept`], each step refusing with a [`Refusal`] that
//! changes nothing: its header (the count, worker, upload id), a repeat of an accepted
//! upload id (answered as a duplicate, nothing added), room in the run's queue for the
//! header's count (decided before any decompression, so a busy manager spends no CPU
//! on uploads it will refuse), the complete validation (off the async runtime), the
//! write-ahead log (durable: the group commit's fsync), and only then the queue. The
//! upload-id check is made twice: two copies of one retried upload may race past the
//! first check and both be logged (recovery takes an upload id once); the second check,
//! under the same lock as the queueing, lets exactly one of them into the replay.

pub mod dedup;
pub mod runs;
pub mod store;

pub use dedup::Dedup;
pub use runs::{Deleted, RunError, Runs};

use crate::config::{Config, RunSettings, RunSpec};
use crate::device::{Device, RunHandle};
use crate::history::{History, Record};
use crate::storage::registry::{Published, Registry};
use crate::dashboard::series::{EpisodeLog, Series};
use crate::trainer::{self, Restore, RunSetup, TrainerStats};
use crate::storage::wal::{self, Wal, WalError, WalStats};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use shine_agent::experience::{self, Expect, WireError};
use shine_agent::{ActionSet, Task};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio_util::bytes::Bytes;

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
    name: String,
    source: Source,
    /// The resolved settings.
    settings: RunSettings,
    action_set: ActionSet,
    task: Task,
    /// What every upload must satisfy beyond the format.
    expect: Expect,
    dir: PathBuf,
    /// Where an upload is made durable before its 202.
    wal: Wal,
    /// The run's side of the device thread (queue, stats, pause).
    handle: RunHandle,
    registry: Arc<Registry>,
    /// Held across the second upload-id check and the queueing (see the module doc).
    dedup: Mutex<Dedup>,
    episodes: Mutex<EpisodeLog>,
    series: Mutex<Series>,
    /// Age of the accepted experience: the sum over transitions of how many model
    /// versions behind the latest each was played, and how many transitions that sums.
    /// Counters only (the sampler takes differences): `series::Sample::data_age`.
    age_sum: AtomicU64,
    age_count: AtomicU64,
}

/// An upload [`Run::accept`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Transitions kept (0 for a duplicate).
    pub count: u64,
    pub worker_id: u32,
    /// Its upload id was accepted before: nothing was added (HTTP 200).
    pub duplicate: bool,
}

/// Why [`Run::accept`] (or [`Run::check_open`]) refused an upload; nothing was kept.
#[derive(Debug, Error)]
pub enum Refusal {
    /// The run is paused (HTTP 503 `run_paused`).
    #[error("run {0:?} is paused: uploads are refused until it is resumed (POST /api/v1/runs/{0}/resume); workers keep their data and retry")]
    Paused(String),
    /// The upload is malformed or does not fit the run (HTTP 400 or 422).
    #[error(transparent)]
    Format(#[from] WireError),
    /// The run's queue has no room for it now (HTTP 503 `busy`).
    #[error("the trainer's ingest queue is full: retry later")]
    Busy,
    /// The disk is full or a file-size limit was reached (HTTP 503 `storage_full`).
    #[error("{0}")]
    StorageFull(String),
    /// Something broke on the manager's side (HTTP 500; logged).
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl Run {
    /// Open the run: its directories, write-ahead log recovery, registry, and its
    /// trainer on `device`. Blocking (file I/O, libtorch).
    pub fn open(spec: RunSpec, source: Source, config: &Config, device: &Device, history: &History) -> anyhow::Result<Run> {
        let settings = spec.resolve(config)?;
        let name = settings.name.clone();
        let dir = store::run_dir(&config.server.data_dir, &name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let paused = store::read_paused(&dir)?.unwrap_or(settings.paused);
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
            side: settings.side(),
            restore,
        };
        let handle = device.add_run(setup, paused, publish).with_context(|| format!("run {name:?}"))?;
        // Kept for the next start only once it opened: a run that fails to open (its
        // directory holds a checkpoint of another action set) must not stop a restart.
        if source == Source::Api {
            if let Err(e) = store::write_stored(&dir, &spec) {
                let _ = device.remove_run(&handle);
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
            settings,
            action_set,
            task,
            expect,
            dir,
            wal,
            handle,
            registry,
            dedup: Mutex::new(dedup),
            episodes: Mutex::new(episodes),
            series: Mutex::new(series),
            age_sum: Default::default(),
            age_count: Default::default(),
        })
    }

    /// Whether the run takes uploads now: not when it is paused. Checked before an
    /// upload's body is read, so a paused run reads none.
    pub fn check_open(&self) -> Result<(), Refusal> {
        if self.is_paused() {
            return Err(Refusal::Paused(self.name.clone()));
        }
        Ok(())
    }

    /// Take one upload (the wire format's bytes) durably: once this returns `Ok` with
    /// `duplicate: false`, the upload is in the write-ahead log and queued for the
    /// replay. The steps, and why in that order: the module doc.
    pub async fn accept(&self, bytes: Bytes) -> Result<Accepted, Refusal> {
        let header = experience::Header::parse(&bytes)?;
        let (count, worker_id, upload_id, played_by) = (header.count as u64, header.meta.worker_id, header.meta.upload_id, header.meta.model_version);
        let duplicate = Accepted { count: 0, worker_id, duplicate: true };
        if self.dedup.lock().expect("dedup lock").contains(&upload_id) {
            return Ok(duplicate);
        }
        let room = self.handle.reserve(count).map_err(|_| Refusal::Busy)?;
        let (expect, body) = (self.expect, bytes.clone());
        let batch = tokio::task::spawn_blocking(move || experience::decode(&body, expect)).await.map_err(anyhow::Error::from)??;
        self.wal.append(bytes, count).await.map_err(|e| match e {
            WalError::StorageFull(_) => Refusal::StorageFull(e.to_string()),
            WalError::Io(_) | WalError::Closed => Refusal::Internal(e.into()),
        })?;
        {
            let mut dedup = self.dedup.lock().expect("dedup lock");
            if dedup.contains(&upload_id) {
                return Ok(duplicate);
            }
            room.ingest(batch).map_err(|_| Refusal::Busy)?;
            dedup.insert(upload_id);
        }
        // How stale the data is: versions between the model that played it and the latest.
        let age = self.registry.latest_version().unwrap_or(0).saturating_sub(played_by);
        self.age_sum.fetch_add(age.saturating_mul(count), Relaxed);
        self.age_count.fetch_add(count, Relaxed);
        Ok(Accepted { count, worker_id, duplicate: false })
    }

    /// Pause or resume training, remembered across restarts. Blocking (a file write,
    /// and the device's barrier): once it returns, a paused run takes no further step
    /// and shows its exact step count.
    pub fn set_paused(&self, paused: bool, device: &Device) -> anyhow::Result<()> {
        store::write_paused(&self.dir, paused)?;
        self.handle.set_paused(paused);
        device.barrier()?;
        tracing::info!(run = %self.name, paused, "run {}", if paused { "paused" } else { "resumed" });
        Ok(())
    }

    pub fn is_paused(&self) -> bool {
        self.handle.is_paused()
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn source(&self) -> Source {
        self.source
    }
    /// The resolved settings.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }
    pub fn action_set(&self) -> ActionSet {
        self.action_set
    }
    pub fn task(&self) -> Task {
        self.task
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Its trainer's live numbers.
    pub fn stats(&self) -> TrainerStats {
        self.handle.stats()
    }
    pub fn wal_stats(&self) -> &WalStats {
        &self.wal.stats
    }
    /// Its published models.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
    /// Its recent episodes (the survival and reward windows).
    pub fn episodes(&self) -> &Mutex<EpisodeLog> {
        &self.episodes
    }
    /// Its stats series (the dashboard's curves).
    pub fn series(&self) -> &Mutex<Series> {
        &self.series
    }
    /// The accepted experience's age so far: (sum of versions behind, transitions).
    pub fn data_age(&self) -> (u64, u64) {
        (self.age_sum.load(Relaxed), self.age_count.load(Relaxed))
    }
}
