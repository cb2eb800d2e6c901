//! The one state struct every request handler shares (`Arc<Manager>`).
//!
//! Locks are std `Mutex`es, not tokio's: every critical section is short and never
//! awaits (mini-redis's reasoning), so an async mutex would only add overhead.

use crate::config::{Config, DEFAULT_RUN};
use crate::device::Device;
use crate::error::ApiError;
use crate::fleet::{Fleet, IdBlocks};
use crate::history::History;
use crate::league::League;
use crate::dashboard::live::LiveHub;
use crate::play::Plays;
use crate::metrics::Metrics;
use crate::run::{Run, RunError, Runs};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub type AppState = Arc<Manager>;

pub struct Manager {
    pub config: Config,
    /// The one thread that trains every run.
    pub device: Device,
    /// The runs by name.
    pub runs: Runs,
    /// Every run's workers (ids are unique across runs; each worker is in one run).
    pub fleet: Mutex<Fleet>,
    /// Keeps worker ids unique across restarts.
    pub worker_ids: IdBlocks,
    pub metrics: Metrics,
    /// Every run's series, episodes and evaluations, across restarts.
    pub history: History,
    /// The league's ratings and the matches handed out (`crate::league`).
    pub league: Mutex<League>,
    /// Live matches: browsers watching workers, and the frames fanned out to them.
    pub live: LiveHub,
    /// Matches people play against the models in the browser (`crate::play`).
    pub plays: Arc<Plays>,
    /// Cancelled when the manager shuts down: requests that wait (long polls,
    /// WebSockets) end at once instead of holding up the final checkpoint.
    pub shutdown: CancellationToken,
}

impl Manager {
    /// The run named `name`, or the API's 404 naming the runs there are (call it only
    /// for a caller allowed to read: the names are the manager's).
    pub fn run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        self.runs.get(name).map_err(|e| match e {
            RunError::NotFound { name, runs } if name == DEFAULT_RUN => ApiError::NotFound(format!(
                "no run {name:?} (routes without /runs/{{run}} address the run \"default\", which this manager's [[runs]] do not declare); runs: {} (GET /api/v1/runs)",
                runs.join(", ")
            )),
            other => other.into(),
        })
    }

    /// Every run, by name.
    pub fn all_runs(&self) -> Vec<Arc<Run>> {
        self.runs.all()
    }

    /// Tell every run's registry which of its models the league needs kept (its best
    /// rated, and those in matches not yet counted); call with the league locked,
    /// after each change to it.
    pub fn keep_league_models(&self, league: &League) {
        let now = std::time::Instant::now();
        for run in self.all_runs() {
            run.registry().keep_for_league(league.best_rated(run.name()), league.in_play(run.name(), now));
        }
    }
}

