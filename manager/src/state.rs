//! The one state struct every request handler shares (`Arc<Manager>`).
//!
//! Locks are std `Mutex`es, not tokio's: every critical section is short and never
//! awaits (mini-redis's reasoning), so an async mutex would only add overhead.

use crate::config::{Config, DEFAULT_RUN};
use crate::device::Device;
use crate::error::ApiError;
use crate::fleet::{Fleet, IdBlocks};
use crate::history::History;
use crate::live::LiveHub;
use crate::metrics::Metrics;
use crate::run::Run;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;

pub type AppState = Arc<Manager>;

pub struct Manager {
    pub config: Config,
    /// The one thread that trains every run.
    pub device: Device,
    /// The runs by name. Each is an `Arc` so a request keeps its run while it is
    /// removed from the map (a delete waits for nothing but the device).
    pub runs: RwLock<BTreeMap<String, Arc<Run>>>,
    /// Every run's workers (ids are unique across runs; each worker is in one run).
    pub fleet: Mutex<Fleet>,
    /// Keeps worker ids unique across restarts.
    pub worker_ids: IdBlocks,
    pub metrics: Metrics,
    /// Every run's series, episodes and evaluations, across restarts.
    pub history: History,
    /// Live matches: browsers watching workers, and the frames fanned out to them.
    pub live: LiveHub,
    /// Serialises creating and deleting runs (both take seconds: files, the device).
    pub run_changes: tokio::sync::Mutex<()>,
    /// Cancelled when the manager shuts down: requests that wait (long polls,
    /// WebSockets) end at once instead of holding up the final checkpoint.
    pub shutdown: CancellationToken,
}

impl Manager {
    /// The run named `name`, or the API's 404 naming the runs there are.
    pub fn run(&self, name: &str) -> Result<Arc<Run>, ApiError> {
        let runs = self.runs.read().expect("runs lock");
        runs.get(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = runs.keys().map(String::as_str).collect();
            let hint = if name == DEFAULT_RUN {
                " (routes without /runs/{run} address the run \"default\", which this manager's [[runs]] do not declare)"
            } else {
                ""
            };
            ApiError::NotFound(format!("no run {name:?}{hint}; runs: {} (GET /api/v1/runs)", names.join(", ")))
        })
    }

    /// Every run, by name.
    pub fn all_runs(&self) -> Vec<Arc<Run>> {
        self.runs.read().expect("runs lock").values().cloned().collect()
    }
}

/// Recently accepted `upload_id`s, so a retried upload is not trained on twice.
///
/// Bounded (the oldest id is forgotten first). A worker retries within seconds to
/// minutes, while the window holds the last `dedup_window` uploads (100,000 by default:
/// hours of a large fleet). A restart refills it from the write-ahead log
/// ([`crate::wal`]), so a retry of a batch accepted just before a crash is still
/// recognised after it. An all-zero id means "no id": never treated as a repeat.
pub struct Dedup {
    cap: usize,
    seen: HashSet<[u8; 16]>,
    order: VecDeque<[u8; 16]>,
}

impl Dedup {
    pub fn new(cap: usize) -> Self {
        Dedup { cap: cap.max(1), seen: HashSet::new(), order: VecDeque::new() }
    }

    pub fn contains(&self, id: &[u8; 16]) -> bool {
        *id != [0; 16] && self.seen.contains(id)
    }

    pub fn insert(&mut self, id: [u8; 16]) {
        if id == [0; 16] || !self.seen.insert(id) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_forgets_the_oldest_first_and_ignores_zero_ids() {
        let mut d = Dedup::new(2);
        d.insert([1; 16]);
        d.insert([2; 16]);
        d.insert([1; 16]);
        assert!(d.contains(&[1; 16]) && d.contains(&[2; 16]));
        d.insert([3; 16]);
        assert!(!d.contains(&[1; 16]), "oldest forgotten");
        assert!(d.contains(&[2; 16]) && d.contains(&[3; 16]));
        d.insert([0; 16]);
        assert!(!d.contains(&[0; 16]));
    }
}
