//! The one state struct every request handler shares (`Arc<Manager>`).
//!
//! Locks are std `Mutex`es, not tokio's: every critical section is short and never
//! awaits (mini-redis's reasoning), so an async mutex would only add overhead.

use crate::config::Config;
use crate::fleet::Fleet;
use crate::live::LiveHub;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::stats::{EpisodeLog, Series};
use crate::trainer::TrainerClient;
use crate::wal::Wal;
use shine_agent::experience::Expect;
use shine_agent::{ActionSet, Task};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub type AppState = Arc<Manager>;

pub struct Manager {
    pub config: Config,
    pub action_set: ActionSet,
    pub task: Task,
    /// What every upload must satisfy beyond the format.
    pub expect: Expect,
    /// Where an upload is made durable before its 202.
    pub wal: Wal,
    /// The trainer's cloneable side (queue and stats); `server` owns the handle.
    pub trainer: TrainerClient,
    pub registry: Arc<Registry>,
    pub fleet: Mutex<Fleet>,
    /// Held across check, ingest and insert so that two concurrent copies of one
    /// upload cannot both get in.
    pub dedup: Mutex<Dedup>,
    pub episodes: Mutex<EpisodeLog>,
    pub series: Mutex<Series>,
    pub metrics: Metrics,
    /// Live matches: browsers watching workers, and the frames fanned out to them.
    pub live: LiveHub,
    /// Age of the accepted experience: the sum over transitions of how many model
    /// versions behind the latest each was played, and how many transitions that sums.
    /// Counters only (the sampler takes differences): `stats::Sample::data_age`.
    pub age_sum: AtomicU64,
    pub age_count: AtomicU64,
    /// Cancelled when the manager shuts down: requests that wait (long polls,
    /// WebSockets) end at once instead of holding up the final checkpoint.
    pub shutdown: CancellationToken,
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
