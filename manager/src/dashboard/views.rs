//! The JSON the dashboard (and anyone reading the API) gets about runs, their stats and
//! their workers, typed in one place, as `shine_agent::protocol` types the workers'
//! messages: `GET /runs` and `/runs/{run}` ([`RunList`], [`RunView`]), `GET /stats`
//! ([`StatsReply`]), `GET /workers` ([`WorkerList`], [`WorkerView`]). `docs/api.md`
//! describes each field; `web/` reads them.

use crate::config::RunSettings;
use crate::run::Source;
use crate::dashboard::series::Sample;
use serde::Serialize;
use shine_agent::protocol::{Heartbeat, RegisterRequest};

/// A run as `GET /runs` shows it.
#[derive(Debug, Serialize)]
pub struct RunView {
    pub name: String,
    pub source: Source,
    pub paused: bool,
    /// False once its trainer has stopped (see the manager's log).
    pub running: bool,
    /// Its settings: the manager's sections with the run's changes applied.
    pub settings: RunSettings,
    /// Where its routes are (`/api/v1` for `default`).
    pub prefix: String,
    pub workers: usize,
    pub train_steps: u64,
    pub train_steps_per_sec: f64,
    pub transitions_inserted: u64,
    pub samples_per_insert: f64,
    pub replay_size: usize,
    pub model_version: u64,
    /// Full-minute survival of its recent evaluation episodes (null: none yet).
    pub eval_survival: Option<f64>,
    /// The runs it trains with as one step, itself among them (null: it trains alone).
    pub group: Option<Vec<String>>,
}

/// `GET /runs`: every run, by name.
#[derive(Debug, Serialize)]
pub struct RunList {
    pub runs: Vec<RunView>,
}

/// `GET /stats`: a run's time series, its values now, and its workers.
#[derive(Debug, Serialize)]
pub struct StatsReply {
    pub run: String,
    pub paused: bool,
    pub interval_secs: f64,
    /// Values right now (rates over the time since the last sample).
    pub current: Sample,
    /// The time series, oldest first.
    pub series: Vec<Sample>,
    pub replay_capacity: usize,
    pub action_set: &'static str,
    pub episodes_total: u64,
    pub eval_episodes_total: u64,
    pub workers: Vec<WorkerView>,
}

/// `GET /workers`: a run's workers, live, stale and recently gone.
#[derive(Debug, Serialize)]
pub struct WorkerList {
    pub workers: Vec<WorkerView>,
}

/// A worker's liveness as the dashboard shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerState {
    Live,
    Stale,
    Gone,
}

/// A worker as the dashboard sees it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerView {
    pub worker_id: u32,
    /// The run it plays for.
    pub run: String,
    pub slot: u32,
    pub epsilon: f64,
    #[serde(flatten)]
    pub info: RegisterRequest,
    pub uptime_secs: f64,
    pub last_seen_secs: f64,
    pub uploads: u64,
    pub transitions: u64,
    /// Seconds since its last accepted experience upload (null: none yet).
    pub last_upload_secs: Option<f64>,
    pub state: WorkerState,
    #[serde(flatten)]
    pub heartbeat: Heartbeat,
}

