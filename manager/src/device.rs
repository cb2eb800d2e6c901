//! The device thread: one thread drives the training device for every run, taking
//! their train steps in turn (Jain & Muthakana's design: one owner of the device, k
//! models interleaved deliberately, while the workers keep producing).
//!
//! ```text
//! let device = Device::start(&trainer_cfg, tch_device)?;  // threads, nice: device-wide
//! let client = device.add_run(RunSetup { name, weight, .. }, publish)?;
//!     // builds and restores the run's learner on the caller's thread, publishes its
//!     // current model, then hands it to the device thread
//! client.reserve(n)?.ingest(batch)    // one run's queue (see trainer::TrainerClient)
//! client.set_paused(true)             // no more train steps for it until resumed
//! device.remove_run(&client)?         // queued uploads in, final checkpoint, gone
//! device.shutdown()?                  // every run: queue drained, final checkpoint
//! ```
//!
//! The loop: take every message waiting (uploads for any run, runs added or removed);
//! move each run's queued uploads into its replay as far as its rate limiter takes
//! them; pick one run that may train ([`Scheduler`]) and take one train step for it;
//! with none, block on the channel for a short while (never spin). A run whose limiter
//! says wait (or that is paused, or still burning in) is skipped, so it never blocks
//! the others. The run's replay, learner and counters are owned by this thread alone:
//! no lock appears in a step.
//!
//! A run whose step fails (its replay refused a batch, a checkpoint could not be read
//! back) is stopped and logged; the other runs go on.

use crate::trainer::{Published, RunSetup, RunTrainer, TrainerClient, TrainerConfig};
use anyhow::bail;
use shine_agent::experience::Batch;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long an idle device thread waits on its channel before it looks at the stop
/// flag again.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// A run's number on this device (names can be reused after a removal; ids are not).
pub type RunId = u64;

/// What the device thread is told.
pub(crate) enum Msg {
    /// An accepted upload for a run's replay.
    Batch(RunId, Batch),
    /// A run joins the device.
    Add(RunId, Box<RunTrainer>),
    /// A run leaves: its queue drained, a final checkpoint; the result is sent back.
    Remove(RunId, SyncSender<anyhow::Result<()>>),
    /// Answered between two steps: whatever step was in flight has finished.
    Barrier(SyncSender<()>),
}

/// The device thread. Dropping it stops the thread and waits for it.
pub struct Device {
    tx: Sender<Msg>,
    stop: Arc<AtomicBool>,
    next_id: AtomicU64,
    device: tch::Device,
    thread: Mutex<Option<JoinHandle<anyhow::Result<()>>>>,
}

impl Device {
    /// Start the thread on `device`, with the device-wide settings of `cfg` (`threads`,
    /// `nice`); runs join it with [`Device::add_run`].
    pub fn start(cfg: &TrainerConfig, device: tch::Device) -> anyhow::Result<Device> {
        if cfg.threads > 0 {
            // Process-wide, and set before the first op so that libtorch's pool is sized once.
            tch::set_num_threads(cfg.threads as i32);
        }
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let nice = cfg.nice;
        let loop_stop = stop.clone();
        let thread = std::thread::Builder::new().name("shine-trainer".into()).spawn(move || {
            if nice != 0 {
                match crate::priority::set_current_thread_nice(nice) {
                    Ok(()) => tracing::debug!(nice, "trainer thread priority set"),
                    Err(e) => tracing::info!(
                        nice,
                        "could not set the trainer thread's priority ({e}; raising it needs root or CAP_SYS_NICE): \
                         it runs at the default priority, and heavy request load may slow training"
                    ),
                }
            }
            let mut l = Loop { rx, stop: loop_stop.clone(), runs: Vec::new(), sched: Scheduler::default() };
            let r = l.run();
            // Whatever ended the loop, no run takes uploads any more.
            loop_stop.store(true, Ordering::Release);
            for slot in &l.runs {
                slot.run.shared.stats.lock().expect("stats lock").running = false;
            }
            if let Err(e) = &r {
                tracing::error!("trainer stopped: {e:#}");
            }
            r
        })?;
        Ok(Device { tx, stop, next_id: AtomicU64::new(1), device, thread: Mutex::new(Some(thread)) })
    }

    /// Build one run's trainer (restoring its checkpoint and rows, publishing its
    /// current model) and add it to the device. Errors: bad config, a replay that does
    /// not fit, an unreadable checkpoint or one for another action set; or the device
    /// has stopped.
    pub fn add_run(&self, setup: RunSetup, publish: impl Fn(Published) + Send + 'static) -> anyhow::Result<TrainerClient> {
        if self.stop.load(Ordering::Acquire) {
            bail!("the trainer has stopped");
        }
        let run = RunTrainer::build(setup, self.device, self.stop.clone(), Box::new(publish))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let client = TrainerClient { run: id, tx: self.tx.clone(), shared: run.shared.clone() };
        self.tx.send(Msg::Add(id, Box::new(run))).map_err(|_| anyhow::anyhow!("the trainer has stopped"))?;
        Ok(client)
    }

    /// Take a run off the device: no more uploads for it, the ones queued go into its
    /// replay, a final checkpoint is written, and it is dropped. Waits for all that.
    pub fn remove_run(&self, client: &TrainerClient) -> anyhow::Result<()> {
        client.shared.run_stop.store(true, Ordering::Release);
        let (tx, rx) = sync_channel(1);
        if self.tx.send(Msg::Remove(client.run, tx)).is_err() {
            bail!("the trainer has stopped");
        }
        rx.recv().map_err(|_| anyhow::anyhow!("the trainer stopped before the run was removed"))?
    }

    /// Wait until the device thread is between two steps: after a run's
    /// `set_paused(true)` and this, that run takes no further step (the one in flight
    /// when it was paused has finished).
    pub fn barrier(&self) -> anyhow::Result<()> {
        let (tx, rx) = sync_channel(1);
        if self.tx.send(Msg::Barrier(tx)).is_err() {
            bail!("the trainer has stopped");
        }
        rx.recv().map_err(|_| anyhow::anyhow!("the trainer stopped"))
    }

    /// Stop after the current step; every run's queue into its replay and a final
    /// checkpoint each; join the thread.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.stop()
    }

    /// [`Device::shutdown`] through a shared reference (the manager's state holds the
    /// device); a second call does nothing.
    pub fn stop(&self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.lock().expect("thread lock").take();
        match thread {
            None => Ok(()),
            Some(t) => match t.join() {
                Ok(r) => r,
                Err(_) => bail!("the trainer thread panicked (see the log above)"),
            },
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::error!("trainer: {e:#}");
        }
    }
}

/// A run on the device thread, with the uploads it has not taken yet.
struct Slot {
    id: RunId,
    run: RunTrainer,
    /// Uploads received while the run's rate limiter held inserts back (still counted
    /// as queued, so the API keeps answering 503 until they are in).
    pending: VecDeque<Batch>,
}

struct Loop {
    rx: Receiver<Msg>,
    stop: Arc<AtomicBool>,
    runs: Vec<Slot>,
    sched: Scheduler,
}

impl Loop {
    fn run(&mut self) -> anyhow::Result<()> {
        while !self.stop.load(Ordering::Acquire) {
            loop {
                match self.rx.try_recv() {
                    Ok(m) => self.handle(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return self.finish(),
                }
            }
            // Everything queued goes into the replays first, so uploads are not starved
            // by training (except where a run's limiter holds its inserts back).
            for i in 0..self.runs.len() {
                self.take_pending(i, false);
            }
            self.runs.retain(|s| !s.run.shared.run_stop.load(Ordering::Acquire));
            let ready: Vec<(RunId, f64)> = self.runs.iter().filter(|s| s.run.may_train()).map(|s| (s.id, s.run.weight)).collect();
            match self.sched.pick(&ready) {
                Some(id) => {
                    let slot = self.runs.iter_mut().find(|s| s.id == id).expect("picked from the runs");
                    if let Err(e) = slot.run.train_step() {
                        fail(slot, e);
                    }
                }
                // Nothing to do until more data arrives: block, with a timeout so the
                // stop flag is seen promptly.
                None => match self.rx.recv_timeout(IDLE_WAIT) {
                    Ok(m) => self.handle(m),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            }
        }
        self.finish()
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Batch(id, b) => match self.runs.iter_mut().find(|s| s.id == id) {
                Some(slot) => slot.pending.push_back(b),
                // The run was removed or failed after this upload was reserved; its
                // queue counter went with it.
                None => tracing::warn!(run = id, "an upload arrived for a run no longer on the device; dropped"),
            },
            Msg::Add(id, run) => {
                tracing::info!(run = %run.name, weight = run.weight, "run joined the device");
                self.sched.add(id);
                self.runs.push(Slot { id, run: *run, pending: VecDeque::new() });
            }
            Msg::Remove(id, reply) => {
                let r = match self.runs.iter().position(|s| s.id == id) {
                    None => Ok(()),
                    Some(i) => {
                        // Uploads sent before the removal are ahead of it in the channel.
                        while let Ok(m) = self.rx.try_recv() {
                            self.handle(m);
                        }
                        self.take_pending(i, true);
                        let mut slot = self.runs.remove(i);
                        self.sched.remove(id);
                        let r = slot.run.final_checkpoint();
                        slot.run.shared.stats.lock().expect("stats lock").running = false;
                        tracing::info!(run = %slot.run.name, "run left the device");
                        r
                    }
                };
                let _ = reply.send(r);
            }
            Msg::Barrier(reply) => {
                let _ = reply.send(());
            }
        }
    }

    /// Move run `i`'s pending uploads into its replay while its limiter takes them
    /// (`all`: regardless, for a stop).
    fn take_pending(&mut self, i: usize, all: bool) {
        let slot = &mut self.runs[i];
        while all || slot.run.takes_inserts() {
            let Some(b) = slot.pending.pop_front() else { break };
            if let Err(e) = slot.run.ingest(b) {
                fail(slot, e);
                break;
            }
        }
    }

    /// Graceful stop: the HTTP side has stopped answering, so everything acknowledged
    /// is queued; all of it goes into the replays (and the counters) before each run's
    /// final checkpoint. Every run gets its checkpoint even if another's fails.
    fn finish(&mut self) -> anyhow::Result<()> {
        while let Ok(m) = self.rx.try_recv() {
            self.handle(m);
        }
        let mut first_err = None;
        for i in 0..self.runs.len() {
            self.take_pending(i, true);
            let slot = &mut self.runs[i];
            if slot.run.shared.run_stop.load(Ordering::Acquire) {
                continue;
            }
            if let Err(e) = slot.run.final_checkpoint() {
                tracing::error!(run = %slot.run.name, "{e:#}");
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// A run's step or insert failed: it stops taking uploads and steps; the rest go on.
fn fail(slot: &mut Slot, e: anyhow::Error) {
    tracing::error!(run = %slot.run.name, "run stopped: {e:#}");
    slot.run.shared.run_stop.store(true, Ordering::Release);
    slot.run.shared.stats.lock().expect("stats lock").running = false;
    // Its queued uploads will never go in: the queue counter says so.
    let lost: u64 = slot.pending.drain(..).map(|b| b.count() as u64).sum();
    slot.run.shared.queued.fetch_sub(lost, Ordering::AcqRel);
}

/// Which run takes the next train step: weighted fair sharing by virtual time
/// (stride scheduling, as in Linux's CFS). Each step costs the run `1 / weight`; the
/// ready run with the least virtual time goes next. A run that is not ready (its
/// limiter waits, it is paused or burning in) banks no credit: its virtual time is
/// raised to the least among the ready ones, so when it comes back it shares from then
/// on rather than taking the device for a burst.
#[derive(Debug, Default)]
pub struct Scheduler {
    vtime: Vec<(RunId, f64)>,
}

impl Scheduler {
    pub fn add(&mut self, id: RunId) {
        // A newcomer starts level with the least busy run, not at zero.
        let start = self.vtime.iter().map(|&(_, v)| v).fold(f64::INFINITY, f64::min);
        self.vtime.push((id, if start.is_finite() { start } else { 0.0 }));
    }

    pub fn remove(&mut self, id: RunId) {
        self.vtime.retain(|&(r, _)| r != id);
    }

    /// The run to step next among `ready` (id and weight), charged for the step.
    pub fn pick(&mut self, ready: &[(RunId, f64)]) -> Option<RunId> {
        let vt = |s: &Self, id: RunId| s.vtime.iter().find(|&&(r, _)| r == id).map_or(0.0, |&(_, v)| v);
        let &(id, weight) = ready.iter().min_by(|a, b| vt(self, a.0).total_cmp(&vt(self, b.0)))?;
        let floor = vt(self, id);
        for (r, v) in &mut self.vtime {
            if *r == id {
                *v += 1.0 / weight;
            } else if !ready.iter().any(|&(x, _)| x == *r) && *v < floor {
                *v = floor;
            }
        }
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trainer::tests::{batch, small, wait_until};
    use crate::trainer::Restore;
    use shine_agent::ActionSet;

    #[test]
    fn two_runs_train_on_one_device_and_a_paused_or_removed_one_leaves_the_other_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let (t, r, d) = small();
        let device = Device::start(&t, tch::Device::Cpu).unwrap();
        let add = |name: &str, actions: ActionSet| {
            let restore = Restore { data_dir: tmp.path().join(name), ..Default::default() };
            let setup = RunSetup { name: name.into(), weight: 1.0, trainer: t.clone(), replay: r.clone(), dqn: d.clone(), actions, restore };
            device.add_run(setup, |_| {}).unwrap()
        };
        let (a, b) = (add("a", ActionSet::Untouchable), add("b", ActionSet::Fight));
        b.set_paused(true);
        device.barrier().unwrap();
        // 200 rows at 8 samples each, batch 8: 200 steps each, then the limiter waits.
        for c in [&a, &b] {
            c.reserve(200).unwrap().ingest(batch(200, 0)).unwrap();
        }
        wait_until(&a, "run a's 200 steps", |s| s.train_steps == 200);
        let sb = wait_until(&b, "run b's rows", |s| s.replay_len == 200);
        assert_eq!((sb.train_steps, sb.paused), (0, true), "a paused run takes no step");
        b.set_paused(false);
        wait_until(&b, "run b's 200 steps", |s| s.train_steps == 200);
        device.remove_run(&a).unwrap();
        assert!(crate::checkpoint::path(&tmp.path().join("a")).exists(), "removal writes the final checkpoint");
        assert!(!a.stats().running);
        assert!(a.reserve(1).is_err(), "a removed run takes no upload");
        b.reserve(100).unwrap().ingest(batch(100, 1)).unwrap();
        wait_until(&b, "run b's next 100 steps", |s| s.train_steps == 300);
        device.shutdown().unwrap();
        assert!(crate::checkpoint::path(&tmp.path().join("b")).exists());
    }

    fn counts(s: &mut Scheduler, steps: usize, ready: impl Fn(usize) -> Vec<(RunId, f64)>) -> [usize; 3] {
        let mut c = [0; 3];
        for i in 0..steps {
            if let Some(id) = s.pick(&ready(i)) {
                c[id as usize] += 1;
            }
        }
        c
    }

    #[test]
    fn equal_weights_take_turns_and_weights_set_the_shares() {
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        assert_eq!(counts(&mut s, 1000, |_| vec![(1, 1.0), (2, 1.0)]), [0, 500, 500]);
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        let c = counts(&mut s, 3000, |_| vec![(1, 2.0), (2, 1.0)]);
        assert!(c[1].abs_diff(2000) <= 1 && c[2].abs_diff(1000) <= 1, "{c:?}");
    }

    #[test]
    fn a_run_that_waits_neither_blocks_the_others_nor_comes_back_for_a_burst() {
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        // Run 2's limiter says wait for 600 steps: run 1 takes them all.
        let c = counts(&mut s, 600, |_| vec![(1, 1.0)]);
        assert_eq!(c, [0, 600, 0]);
        // Then both are ready: they alternate from here, run 2 has no 600-step credit.
        let c = counts(&mut s, 100, |_| vec![(1, 1.0), (2, 1.0)]);
        assert!(c[1].abs_diff(50) <= 1 && c[2].abs_diff(50) <= 1, "{c:?}");
        assert_eq!(s.pick(&[]), None);
    }

    #[test]
    fn a_run_added_late_starts_level_with_the_others() {
        let mut s = Scheduler::default();
        s.add(1);
        counts(&mut s, 500, |_| vec![(1, 1.0)]);
        s.add(2);
        let c = counts(&mut s, 100, |_| vec![(1, 1.0), (2, 1.0)]);
        assert!(c[1].abs_diff(50) <= 1 && c[2].abs_diff(50) <= 1, "{c:?}");
        s.remove(1);
        assert_eq!(counts(&mut s, 10, |_| vec![(2, 1.0)]), [0, 0, 10]);
    }
}
