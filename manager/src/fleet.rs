//! The worker registry: ids, liveness, runs, and the Ape-X epsilon ladder.
//!
//! Worker ids are unique across runs; each worker is in one run, and each run has its
//! own ladder: the slots and `N` below count that run's workers only, and `base`,
//! `alpha`, the configured fleet size (or one fixed epsilon instead) are the run's own
//! ([`Exploration`], given at registration).
//!
//! Each live worker holds a *slot* `i` (the smallest free one in its run when it registers); its
//! epsilon is `base^(1 + alpha * i / (N - 1))` (Ape-X: base 0.4, alpha 7), so slot 0
//! explores most (0.4) and the last slot least (0.4^8 = 0.00066). `N` is the configured
//! fleet size, or the live worker count when that is 0 (or smaller than the slots in
//! use); with `N = 1` the single worker gets `base`. Workers learn a changed epsilon
//! from each heartbeat reply.
//!
//! Worker ids are never reused, across restarts too ([`IdBlocks`]): a worker still
//! running from before a restart must not pass for the one that registered since
//! under its old number (its heartbeats would keep the newcomer's record alive and it
//! would never register again).
//!
//! A worker not heard from for `worker_timeout_secs` is dropped and its slot is free
//! for the next registration; if it comes back, its heartbeat is answered 404 and it
//! registers again (as after a manager restart, when the registry starts empty: it is
//! not persisted, workers re-register within one heartbeat).
//!
//! The dashboard sees each worker's state: `live` (heard from within
//! [`STALE_HEARTBEATS`] heartbeat intervals), `stale` (silent longer, not yet timed
//! out), `gone` (timed out: the last [`GONE_KEPT`] of those within [`GONE_SECS`] stay
//! listed, so a crashed worker does not silently vanish from the table).
//!
//! Time is passed in (`now`) so tests drive it without sleeping.

use crate::config::{Exploration, WorkersConfig};
use crate::dashboard::views::{WorkerState, WorkerView};
use shine_agent::protocol::{Heartbeat, RegisterRequest};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
struct Worker {
    run: String,
    /// Its run's exploration (the same for every worker of the run).
    explore: Exploration,
    info: RegisterRequest,
    slot: u32,
    registered: Instant,
    last_seen: Instant,
    last: Heartbeat,
    uploads: u64,
    transitions: u64,
    last_upload: Option<Instant>,
}

/// A worker silent for more than this many heartbeat intervals is `stale`.
pub const STALE_HEARTBEATS: f64 = 2.5;
/// Timed-out workers the list keeps showing as `gone`...
pub const GONE_KEPT: usize = 16;
/// ...for this many seconds.
pub const GONE_SECS: f64 = 600.0;

pub struct Fleet {
    /// The fleet's cadences and timeout (each run's exploration comes with its workers).
    cfg: WorkersConfig,
    timeout: Duration,
    next_id: u32,
    workers: BTreeMap<u32, Worker>,
    /// Timed-out workers, newest last, with when they timed out.
    gone: VecDeque<(Instant, u32, Worker)>,
}

/// Ids handed out in blocks, the end of the current block kept on disk
/// (`<data_dir>/worker-ids.json`): a restart starts after every id any earlier life
/// may have handed out, with one small write per [`IdBlocks::BLOCK`] registrations.
pub struct IdBlocks {
    path: std::path::PathBuf,
    /// Ids below this may have been handed out.
    reserved: std::sync::Mutex<u32>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct IdFile {
    reserved_below: u32,
}

impl IdBlocks {
    pub const BLOCK: u32 = 1024;

    /// Read the file (none: a first start) and the first id this life may use.
    pub fn open(data_dir: &std::path::Path) -> anyhow::Result<(IdBlocks, u32)> {
        use anyhow::Context;
        let path = data_dir.join("worker-ids.json");
        let first = match std::fs::read(&path) {
            Ok(b) => {
                serde_json::from_slice::<IdFile>(&b)
                    .with_context(|| format!("parsing {} (delete it to number workers from 1 again)", path.display()))?
                    .reserved_below
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok((IdBlocks { path, reserved: std::sync::Mutex::new(first) }, first.max(1)))
    }

    /// Make sure `id` is below the reserved end on disk (a write once per block).
    /// Blocking.
    pub fn cover(&self, id: u32) -> anyhow::Result<()> {
        use anyhow::Context;
        let mut reserved = self.reserved.lock().expect("ids lock");
        if id < *reserved {
            return Ok(());
        }
        let end = id.saturating_add(Self::BLOCK);
        let bytes = serde_json::to_vec(&IdFile { reserved_below: end }).expect("plain struct");
        shine_agent::durable::write_atomic(&self.path, &bytes).with_context(|| format!("writing {}", self.path.display()))?;
        *reserved = end;
        Ok(())
    }
}

impl Fleet {
    /// A fleet whose first worker id is `first_id` ([`IdBlocks::open`]).
    pub fn new(cfg: WorkersConfig, first_id: u32) -> Fleet {
        let timeout = Duration::from_secs_f64(cfg.worker_timeout_secs);
        Fleet { cfg, timeout, next_id: first_id.max(1), workers: BTreeMap::new(), gone: VecDeque::new() }
    }

    /// Drop workers not heard from within the timeout; returns how many went.
    pub fn sweep(&mut self, now: Instant) -> usize {
        let timeout = self.timeout;
        let expired: Vec<u32> = self.workers.iter().filter(|(_, w)| now.saturating_duration_since(w.last_seen) >= timeout).map(|(&id, _)| id).collect();
        for id in &expired {
            let w = self.workers.remove(id).expect("listed above");
            tracing::info!(worker_id = id, host = %w.info.host, slot = w.slot, "worker timed out; its slot is free");
            if self.gone.len() == GONE_KEPT {
                self.gone.pop_front();
            }
            self.gone.push_back((now, *id, w));
        }
        let keep = Duration::from_secs_f64(GONE_SECS);
        while self.gone.front().is_some_and(|(t, _, _)| now.saturating_duration_since(*t) > keep) {
            self.gone.pop_front();
        }
        expired.len()
    }

    /// Register a worker into `run`, which explores as `explore` says: a new id and the
    /// smallest free slot of its ladder.
    pub fn register(&mut self, info: RegisterRequest, run: &str, explore: &Exploration, now: Instant) -> (u32, f64) {
        self.sweep(now);
        let used: BTreeSet<u32> = self.workers.values().filter(|w| w.run == run).map(|w| w.slot).collect();
        let slot = (0..).find(|s| !used.contains(s)).expect("a free slot");
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        let w = Worker {
            run: run.into(),
            explore: explore.clone(),
            info,
            slot,
            registered: now,
            last_seen: now,
            last: Heartbeat::default(),
            uploads: 0,
            transitions: 0,
            last_upload: None,
        };
        self.workers.insert(id, w);
        (id, self.epsilon_of(&self.workers[&id]))
    }

    /// The run a registered worker plays for (the tests' view; requests carry the run
    /// in their path).
    #[cfg(test)]
    fn run_of(&self, id: u32) -> Option<&str> {
        self.workers.get(&id).map(|w| w.run.as_str())
    }

    /// Forget every worker of a deleted run (their ids answer 404 from then on).
    pub fn remove_run(&mut self, run: &str) -> usize {
        let before = self.workers.len();
        self.workers.retain(|_, w| w.run != run);
        self.gone.retain(|(_, _, w)| w.run != run);
        before - self.workers.len()
    }

    /// Registered workers of `run`.
    pub fn live_in(&self, run: &str) -> usize {
        self.workers.values().filter(|w| w.run == run).count()
    }

    /// Record a heartbeat; `None` if the id is unknown (or timed out).
    pub fn heartbeat(&mut self, id: u32, hb: Heartbeat, now: Instant) -> Option<f64> {
        self.sweep(now);
        let w = self.workers.get_mut(&id)?;
        w.last_seen = now;
        w.last = hb;
        let w = &self.workers[&id];
        Some(self.epsilon_of(w))
    }

    /// Any contact from a known worker (an upload, episodes) keeps it alive. `run`: the
    /// run the contact was for, if it names one; a worker of another run is left alone
    /// (after a manager restart ids start again from 1, so an old worker's upload may
    /// carry a new worker's id until it registers again).
    pub fn touch(&mut self, id: u32, run: Option<&str>, transitions: u64, now: Instant) {
        if let Some(w) = self.workers.get_mut(&id).filter(|w| run.is_none_or(|r| r == w.run)) {
            w.last_seen = now;
            if transitions > 0 {
                w.uploads += 1;
                w.transitions += transitions;
                w.last_upload = Some(now);
            }
        }
    }

    pub fn live(&self) -> usize {
        self.workers.len()
    }

    /// Whether `id` is a registered worker that has not timed out.
    pub fn contains(&self, id: u32, now: Instant) -> bool {
        self.workers.get(&id).is_some_and(|w| now.saturating_duration_since(w.last_seen) < self.timeout)
    }

    /// N of `run`'s ladder, whose configured fleet size is `fleet_size`.
    fn ladder_size(&self, run: &str, fleet_size: u32) -> u32 {
        let in_run = || self.workers.values().filter(|w| w.run == run);
        let highest_slot = in_run().map(|w| w.slot + 1).max().unwrap_or(0);
        fleet_size.max(in_run().count() as u32).max(highest_slot)
    }

    /// The epsilon of registered worker `w`, in its run's ladder.
    fn epsilon_of(&self, w: &Worker) -> f64 {
        let e = &w.explore;
        e.epsilon.unwrap_or_else(|| ladder(e.epsilon_base, e.epsilon_alpha, w.slot, self.ladder_size(&w.run, e.fleet_size)))
    }

    /// The registered workers (live or stale) by id, then the recently gone ones,
    /// most recent first; of every run, or of one.
    pub fn list(&self, now: Instant, run: Option<&str>) -> Vec<WorkerView> {
        let stale_after = self.cfg.heartbeat_secs * STALE_HEARTBEATS;
        let view = |id: u32, w: &Worker, epsilon: f64, state: Option<WorkerState>| {
            let last_seen_secs = now.saturating_duration_since(w.last_seen).as_secs_f64();
            let state = state.unwrap_or(if last_seen_secs > stale_after { WorkerState::Stale } else { WorkerState::Live });
            WorkerView {
                worker_id: id,
                run: w.run.clone(),
                slot: w.slot,
                epsilon,
                info: w.info.clone(),
                uptime_secs: now.saturating_duration_since(w.registered).as_secs_f64(),
                last_seen_secs,
                uploads: w.uploads,
                transitions: w.transitions,
                last_upload_secs: w.last_upload.map(|t| now.saturating_duration_since(t).as_secs_f64()),
                state,
                heartbeat: w.last.clone(),
            }
        };
        let wanted = |w: &Worker| run.is_none_or(|r| r == w.run);
        let registered = self.workers.iter().filter(|(_, w)| wanted(w)).map(|(&id, w)| view(id, w, self.epsilon_of(w), None));
        // A gone worker keeps the epsilon it last had (its slot may be someone else's now).
        let gone = self.gone.iter().rev().filter(|(_, _, w)| wanted(w)).map(|(_, id, w)| view(*id, w, self.epsilon_of(w), Some(WorkerState::Gone)));
        registered.chain(gone).collect()
    }
}

/// Ape-X: `eps_i = base^(1 + alpha * i / (n - 1))`, `base` when `n <= 1`.
pub fn ladder(base: f64, alpha: f64, i: u32, n: u32) -> f64 {
    if n <= 1 {
        return base;
    }
    let i = i.min(n - 1);
    base.powf(1.0 + alpha * i as f64 / (n - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        Fleet::new(WorkersConfig { worker_timeout_secs: 10.0, ..Default::default() }, 1)
    }

    /// The default exploration (the ladder from 0.4, alpha 7) with a fleet size.
    fn ex(fleet_size: u32) -> Exploration {
        Exploration::of(&WorkersConfig { fleet_size, ..Default::default() })
    }

    #[test]
    fn ladder_ends_are_ape_x() {
        assert!((ladder(0.4, 7.0, 0, 8) - 0.4).abs() < 1e-12);
        assert!((ladder(0.4, 7.0, 7, 8) - 0.4f64.powi(8)).abs() < 1e-12);
        assert_eq!(ladder(0.4, 7.0, 0, 1), 0.4);
        let mid = ladder(0.4, 7.0, 3, 8);
        assert!(mid < 0.4 && mid > 0.4f64.powi(8));
    }

    #[test]
    fn slots_follow_live_workers_and_are_reused_after_timeout() {
        let t0 = Instant::now();
        let mut f = fleet();
        let (a, ea) = f.register(RegisterRequest::default(), "r", &ex(0), t0);
        assert_eq!(ea, 0.4, "a lone worker explores at base");
        let (b, eb) = f.register(RegisterRequest::default(), "r", &ex(0), t0);
        assert!((eb - 0.4f64.powi(8)).abs() < 1e-12, "second of two is the greedy end: {eb}");
        assert_ne!(a, b);
        // a keeps beating, b goes silent.
        let t1 = t0 + Duration::from_secs(6);
        f.heartbeat(a, Heartbeat::default(), t1).unwrap();
        let t2 = t0 + Duration::from_secs(11);
        assert_eq!(f.heartbeat(b, Heartbeat::default(), t2), None, "b timed out");
        assert_eq!(f.live(), 1);
        assert_eq!(f.heartbeat(a, Heartbeat::default(), t2), Some(0.4), "a alone again: N = 1");
        let (c, ec) = f.register(RegisterRequest::default(), "r", &ex(0), t2);
        assert!(c != a && c != b);
        assert_eq!(f.list(t2, None).iter().find(|w| w.worker_id == c).unwrap().slot, 1, "b's slot reused");
        assert!((ec - 0.4f64.powi(8)).abs() < 1e-12);
    }

    #[test]
    fn each_run_has_its_own_ladder() {
        let t0 = Instant::now();
        let mut f = fleet();
        let (a, ea) = f.register(RegisterRequest::default(), "dodge", &ex(0), t0);
        let (b, eb) = f.register(RegisterRequest::default(), "fight", &ex(0), t0);
        assert_eq!((ea, eb), (0.4, 0.4), "each is the lone worker of its run: slot 0, N = 1");
        let (c, ec) = f.register(RegisterRequest::default(), "fight", &ex(0), t0);
        assert!((ec - 0.4f64.powi(8)).abs() < 1e-12, "second of fight's two: {ec}");
        assert_eq!(f.heartbeat(a, Heartbeat::default(), t0), Some(0.4), "dodge's ladder did not stretch");
        assert_eq!((f.run_of(b), f.run_of(c), f.live_in("fight"), f.live_in("dodge")), (Some("fight"), Some("fight"), 2, 1));
        let ids: Vec<u32> = f.list(t0, Some("fight")).iter().map(|w| w.worker_id).collect();
        assert_eq!(ids, vec![b, c]);
        assert_eq!(f.remove_run("fight"), 2);
        assert_eq!((f.live(), f.run_of(a), f.run_of(b)), (1, Some("dodge"), None));
    }

    #[test]
    fn each_run_explores_as_its_settings_say() {
        // One run with a fixed epsilon, one with a ladder of its own from 0.2, one with
        // the manager's ladder: the same slots get each run's own epsilons.
        let t0 = Instant::now();
        let mut f = fleet();
        let fixed = Exploration { epsilon: Some(0.1), ..ex(0) };
        let low = Exploration { epsilon_base: 0.2, epsilon_alpha: 1.0, ..ex(0) };
        let (a, ea) = f.register(RegisterRequest::default(), "fixed", &fixed, t0);
        let (_, eb) = f.register(RegisterRequest::default(), "low", &low, t0);
        let (_, ec) = f.register(RegisterRequest::default(), "base", &ex(0), t0);
        assert_eq!((ea, eb, ec), (0.1, 0.2, 0.4), "each run's first worker: its fixed epsilon or its ladder's base");
        let (_, ea2) = f.register(RegisterRequest::default(), "fixed", &fixed, t0);
        let (b2, eb2) = f.register(RegisterRequest::default(), "low", &low, t0);
        let (_, ec2) = f.register(RegisterRequest::default(), "base", &ex(0), t0);
        assert_eq!(ea2, 0.1, "a fixed epsilon stays whatever the slot");
        assert!((eb2 - 0.2f64.powi(2)).abs() < 1e-12, "the second of low's two: 0.2^(1 + 1): {eb2}");
        assert!((ec2 - 0.4f64.powi(8)).abs() < 1e-12, "the second of base's two: 0.4^8: {ec2}");
        assert_eq!(f.heartbeat(a, Heartbeat::default(), t0), Some(0.1));
        let listed = f.list(t0, Some("low"));
        assert_eq!(listed.iter().find(|w| w.worker_id == b2).map(|w| w.epsilon), Some(eb2), "the list shows the run's own epsilons");
    }

    #[test]
    fn worker_ids_are_never_handed_out_twice_across_restarts() {
        let tmp = tempfile::tempdir().unwrap();
        let (ids, first) = IdBlocks::open(tmp.path()).unwrap();
        assert_eq!(first, 1);
        let mut f = Fleet::new(WorkersConfig::default(), first);
        let t0 = Instant::now();
        for _ in 0..3 {
            let (id, _) = f.register(RegisterRequest::default(), "r", &ex(0), t0);
            ids.cover(id).unwrap();
        }
        // A crash: the next life starts above every id the first could have given.
        let (_, first) = IdBlocks::open(tmp.path()).unwrap();
        assert_eq!(first, 1 + IdBlocks::BLOCK);
        let mut f = Fleet::new(WorkersConfig::default(), first);
        assert_eq!(f.register(RegisterRequest::default(), "r", &ex(0), t0).0, 1 + IdBlocks::BLOCK);
        std::fs::write(tmp.path().join("worker-ids.json"), "{").unwrap();
        let e = IdBlocks::open(tmp.path()).err().unwrap().to_string();
        assert!(e.contains("worker-ids.json"), "{e}");
    }

    #[test]
    fn fleet_size_fixes_epsilons_from_the_start() {
        let t0 = Instant::now();
        let mut f = fleet();
        let (_, e0) = f.register(RegisterRequest::default(), "r", &ex(4), t0);
        let (_, e1) = f.register(RegisterRequest::default(), "r", &ex(4), t0);
        assert_eq!(e0, 0.4);
        assert!((e1 - ladder(0.4, 7.0, 1, 4)).abs() < 1e-12);
    }

    #[test]
    fn workers_go_stale_then_gone_and_gone_ones_stay_listed() {
        // heartbeat_secs 1 (stale after 2.5 s), timeout 10 s.
        let mut f = Fleet::new(WorkersConfig { heartbeat_secs: 1.0, worker_timeout_secs: 10.0, ..Default::default() }, 1);
        let t0 = Instant::now();
        let (a, _) = f.register(RegisterRequest { host: "a".into(), ..Default::default() }, "r", &ex(0), t0);
        let state = |f: &Fleet, t| f.list(t, None).iter().find(|w| w.worker_id == a).map(|w| w.state);
        assert_eq!(state(&f, t0 + Duration::from_secs(2)), Some(WorkerState::Live));
        assert_eq!(state(&f, t0 + Duration::from_secs(3)), Some(WorkerState::Stale));
        let t1 = t0 + Duration::from_secs(11);
        f.sweep(t1);
        assert!(!f.contains(a, t1));
        assert_eq!(f.live(), 0);
        assert_eq!(state(&f, t1), Some(WorkerState::Gone), "listed as gone after the timeout");
        f.sweep(t1 + Duration::from_secs_f64(GONE_SECS + 1.0));
        assert_eq!(state(&f, t1 + Duration::from_secs_f64(GONE_SECS + 1.0)), None, "and forgotten later");
    }

    #[test]
    fn uploads_keep_a_worker_alive() {
        let t0 = Instant::now();
        let mut f = fleet();
        let (a, _) = f.register(RegisterRequest::default(), "r", &ex(0), t0);
        f.touch(a, Some("r"), 100, t0 + Duration::from_secs(8));
        f.touch(a, Some("other"), 50, t0 + Duration::from_secs(8));
        assert!(f.heartbeat(a, Heartbeat::default(), t0 + Duration::from_secs(15)).is_some());
        let w = &f.list(t0 + Duration::from_secs(15), None)[0];
        assert_eq!(w.transitions, 100);
        assert_eq!(w.last_upload_secs, Some(7.0));
    }
}
