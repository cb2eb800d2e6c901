//! The counters and identity that a run's actor thread and network tasks share: plain
//! atomics, so that the actor never waits on the network side to count something.
//!
//! - [`Identity`]: who this worker is at the manager, renewed when the manager forgets it.
//! - [`ActorCounters`]: what the actor played (heartbeats, the stats file).
//! - [`UploadStats`]: what the uploader delivered, dropped or still holds.
//! - [`Session`]: all of the above with the client and the shutdown token, cloned
//!   into every task of the run.

use crate::client::Client;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What the tasks of one run share; cheap to clone.
#[derive(Clone)]
pub struct Session {
    pub client: Client,
    pub identity: Arc<Identity>,
    pub counters: Arc<ActorCounters>,
    pub uploads: Arc<UploadStats>,
    /// The one shutdown signal (`shine_agent::shutdown`): every task returns when it fires.
    pub cancel: CancellationToken,
}

/// What the uploader did, for heartbeats, the log and the stats file.
#[derive(Debug, Default)]
pub struct UploadStats {
    /// Batches and transitions the manager accepted (2xx, not duplicates).
    pub batches_uploaded: AtomicU64,
    pub transitions_uploaded: AtomicU64,
    /// 2xx answers saying "already have it": retries whose first answer was lost.
    pub duplicates: AtomicU64,
    /// Rejected for good (4xx other than 401/403/404).
    pub batches_rejected: AtomicU64,
    pub transitions_rejected: AtomicU64,
    /// Dropped because the spool was full.
    pub batches_dropped: AtomicU64,
    pub transitions_dropped: AtomicU64,
    /// 503 answers: the manager's trainer was busy (flow control; the batch is retried).
    pub busy_answers: AtomicU64,
    /// Batches waiting in the spool right now.
    pub spooled_batches: AtomicU64,
    pub spooled_transitions: AtomicU64,
}

/// This worker's identity at the manager; renewed when the manager forgets it.
#[derive(Debug, Default)]
pub struct Identity {
    worker_id: AtomicU32,
    /// Woken when a request said 404: the registration task registers again.
    pub reregister: Notify,
}

impl Identity {
    pub fn new(worker_id: u32) -> Self {
        Identity { worker_id: AtomicU32::new(worker_id), reregister: Notify::new() }
    }
    pub fn worker_id(&self) -> u32 {
        self.worker_id.load(Relaxed)
    }
    pub fn set_worker_id(&self, id: u32) {
        self.worker_id.store(id, Relaxed);
    }
}

/// Counters the actor keeps and the network side reports (heartbeats, stats file).
#[derive(Debug, Default)]
pub struct ActorCounters {
    pub frames: AtomicU64,
    pub skipped_frames: AtomicU64,
    pub episodes: AtomicU64,
    /// Episodes ended early because the game ran on while the bot did not decide.
    pub episodes_cut: AtomicU64,
    /// Transitions handed to the uploader.
    pub transitions: AtomicU64,
    /// Decisions that never became transitions (time-limit cut with n > 1, a cut
    /// episode, emulator failures, shutdown with n > 1).
    pub incomplete: AtomicU64,
    /// Episode reports dropped because the report queue was full.
    pub reports_dropped: AtomicU64,
    pub model_version: AtomicU64,
    pub model_swaps: AtomicU64,
    /// Environments playing now, and why that many (`--envs auto` says what it measured).
    pub envs: AtomicU64,
    /// `--envs auto` sets the count.
    pub envs_auto: std::sync::atomic::AtomicBool,
    /// Batches are this many times the manager's size and age (0 or 1: as asked): the
    /// uploader doubles it while the manager answers busy ([`crate::pipeline::uploader::next_scale`]).
    pub batch_scale: AtomicU64,
    /// The most `batch_scale` can usefully be: the batch cap over the manager's size.
    pub batch_scale_max: AtomicU64,
    envs_reason: std::sync::Mutex<String>,
    /// The manager's epsilon, as f64 bits.
    epsilon: AtomicU64,
}

impl ActorCounters {
    pub fn set_envs(&self, n: usize, reason: String) {
        self.envs.store(n as u64, Relaxed);
        let mut r = self.envs_reason.lock().unwrap_or_else(|e| e.into_inner());
        if *r != reason {
            *r = reason;
        }
    }
    pub fn envs_reason(&self) -> String {
        self.envs_reason.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn epsilon(&self) -> f64 {
        f64::from_bits(self.epsilon.load(Relaxed))
    }
    pub fn set_epsilon(&self, eps: f64) {
        self.epsilon.store(eps.clamp(0.0, 1.0).to_bits(), Relaxed);
    }
}
