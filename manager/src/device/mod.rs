//! The device layer: one thread drives the training device for every run, taking their
//! train steps in turn (Jain & Muthakana's design: one owner of the device, k models
//! interleaved deliberately, while the workers keep producing).
//!
//! ```text
//! let device = Device::start(&trainer_cfg, tch_device)?;  // threads, nice: device-wide
//! let handle = device.add_run(RunSetup { name, weight, .. }, paused, publish)?;
//!     // builds and restores the run's trainer on the caller's thread (it publishes
//!     // its current model), then hands it to the device thread
//! handle.reserve(n)?.ingest(batch)    // one run's queue (handle::RunHandle)
//! handle.set_paused(true)             // no more train steps for it until resumed
//! device.remove_run(&handle)?         // queued uploads in, final checkpoint, gone
//! device.shutdown()?                  // every run: queue drained, final checkpoint
//! ```
//!
//! - [`handle`]: a run's handle, the room an upload takes in its queue, the messages.
//! - [`scheduler`]: which run takes the next step (weighted fair sharing).
//! - [`group`]: runs that share a network shape trained as one step (`[trainer]
//!   grouped`): one chain of batched kernels for k runs instead of k chains.
//! - this file: the thread and its loop. One run's learner is [`crate::trainer`]; this
//!   layer gives it a thread, a queue and a turn.
//!
//! The loop: take every message waiting (uploads for any run, runs added or removed);
//! move each run's queued uploads into its replay as far as its rate limiter takes
//! them; pick one run that may train ([`Scheduler`]) and take one train step for it
//! (for its whole group when it trains in one: the members that may train and are due
//! move, the others stay as they are); with none, block on the channel for a short while (never spin). A run whose limiter
//! says wait (or that is paused, or still burning in) is skipped, so it never blocks
//! the others. The runs' trainers are owned by this thread alone: no lock appears in a
//! step. Their numbers are copied out to the handles after each upload taken in and
//! each step that read them back (every `stats_every` steps), not after every step.
//!
//! Why one owner thread and a std channel: libtorch calls block, so training cannot
//! live on the async runtime; one owner means the replay and the model need no locks.
//!
//! A run whose step fails (its replay refused a batch, a checkpoint could not be read
//! back) is stopped and logged; the other runs go on.

pub mod group;
pub mod handle;
pub mod scheduler;

pub use group::TrainGroup;
pub use handle::{IngestError, Reservation, RunHandle, RunId};
pub use scheduler::Scheduler;

use crate::storage::registry::Published;
use crate::trainer::{Restore, RunSetup, RunTrainer, TrainerConfig, TrainerStats};
use anyhow::bail;
use handle::{Msg, Shared};
use shine_agent::dqn::{DqnConfig, GroupShape};
use shine_agent::experience::Batch;
use shine_agent::ActionSet;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long an idle device thread waits on its channel before it looks at the stop
/// flag again.
const IDLE_WAIT: Duration = Duration::from_millis(50);

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
                match crate::nice::set_current_thread_nice(nice) {
                    Ok(()) => tracing::debug!(nice, "trainer thread priority set"),
                    Err(e) => tracing::info!(
                        nice,
                        "could not set the trainer thread's priority ({e}; raising it needs root or CAP_SYS_NICE): \
                         it runs at the default priority, and heavy request load may slow training"
                    ),
                }
            }
            let mut l = Loop { rx, stop: loop_stop.clone(), runs: Vec::new(), sched: Scheduler::default(), groups: Vec::new(), device };
            let r = l.run();
            // Whatever ended the loop, no run takes uploads any more.
            loop_stop.store(true, Ordering::Release);
            for slot in &l.runs {
                slot.shared.ended();
            }
            if let Err(e) = &r {
                tracing::error!("trainer stopped: {e:#}");
            }
            r
        })?;
        Ok(Device { tx, stop, next_id: AtomicU64::new(1), device, thread: Mutex::new(Some(thread)) })
    }

    /// Build one run's trainer (restoring its checkpoint and rows, publishing its
    /// current model) and add it to the device, `paused` or not from its first turn (a
    /// run paused before a restart takes no step after it). Errors: bad config, a
    /// replay that does not fit, an unreadable checkpoint or one for another action set;
    /// or the device has stopped.
    pub fn add_run(&self, setup: RunSetup, paused: bool, publish: impl Fn(Published) + Send + 'static) -> anyhow::Result<RunHandle> {
        if self.stop.load(Ordering::Acquire) {
            bail!("the trainer has stopped");
        }
        let run = RunTrainer::build(setup, self.device, Box::new(publish))?;
        let shared = Arc::new(Shared::new(run.stats().clone(), self.stop.clone(), run.queue_capacity()));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let handle = RunHandle { run: id, tx: self.tx.clone(), shared: shared.clone() };
        handle.set_paused(paused);
        self.tx.send(Msg::Add(id, Box::new(run), shared)).map_err(|_| anyhow::anyhow!("the trainer has stopped"))?;
        Ok(handle)
    }

    /// The training device.
    pub fn training_device(&self) -> tch::Device {
        self.device
    }

    /// Take a run off the device: no more uploads for it, the ones queued go into its
    /// replay, a final checkpoint is written, and it is dropped. Waits for all that.
    pub fn remove_run(&self, handle: &RunHandle) -> anyhow::Result<()> {
        handle.shared.run_stop.store(true, Ordering::Release);
        let (tx, rx) = sync_channel(1);
        if self.tx.send(Msg::Remove(handle.run, tx)).is_err() {
            bail!("the trainer has stopped");
        }
        rx.recv().map_err(|_| anyhow::anyhow!("the trainer stopped before the run was removed"))?
    }

    /// Wait until the device thread is between two steps: after a run's
    /// `set_paused(true)` and this, that run takes no further step (the one in flight
    /// when it was paused has finished), and its handles show its exact step count.
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

/// A run on the device thread: its trainer, what its handles share, and the uploads
/// it has not taken yet.
struct Slot {
    id: RunId,
    run: RunTrainer,
    shared: Arc<Shared>,
    /// Uploads received while the run's rate limiter held inserts back (still counted
    /// as queued, so the API keeps answering 503 until they are in).
    pending: VecDeque<Batch>,
    /// Its step or an insert failed ([`fail`]): it is dropped from the loop. (Not the
    /// shared `run_stop`, which `Device::remove_run` also sets, before its message: a
    /// run on its way out must stay until that message writes its final checkpoint.)
    failed: bool,
}

impl Slot {
    /// Copy the trainer's numbers out to the run's handles.
    fn show(&self) {
        let mut s = self.shared.stats.lock().expect("stats lock");
        let running = s.running;
        *s = self.run.stats().clone();
        s.running = running;
    }
}

struct Loop {
    rx: Receiver<Msg>,
    stop: Arc<AtomicBool>,
    runs: Vec<Slot>,
    sched: Scheduler,
    /// The runs as they train ([`group`]): each run in one group, alone or with others.
    groups: Vec<TrainGroup>,
    /// The training device (a regroup hands dropped groups' memory back on CUDA).
    device: tch::Device,
}

/// The slots of `ids`, in that order (each id once, every one on the device).
fn slots_of<'a>(runs: &'a mut [Slot], ids: &[RunId]) -> Vec<&'a mut Slot> {
    let mut each: Vec<Option<&mut Slot>> = runs.iter_mut().map(Some).collect();
    ids.iter()
        .map(|id| each.iter_mut().find(|s| s.as_ref().is_some_and(|s| s.id == *id)).and_then(Option::take).expect("a group's member is on the device"))
        .collect()
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
            let before = self.runs.len();
            self.runs.retain(|s| !s.failed);
            if self.runs.len() != before {
                self.regroup();
            }
            let ready: Vec<(RunId, f64)> =
                self.runs.iter().filter(|s| s.run.may_train(s.shared.paused.load(Ordering::Acquire))).map(|s| (s.id, s.run.weight())).collect();
            match self.sched.pick(&ready) {
                Some(id) => {
                    let g = self.groups.iter().position(|g| g.members.contains(&id)).expect("every run on the device is in a group");
                    self.group_step(g, id, &ready);
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

    /// One step of group `g`, picked through its member `picked`: the members that are
    /// ready and due move, the others stay as they are. A failed step stops every
    /// member (they shared it); a member's failed bookkeeping stops that member.
    fn group_step(&mut self, g: usize, picked: RunId, ready: &[(RunId, f64)]) {
        let group = &mut self.groups[g];
        let moves = self.sched.with_group(picked, &group.members, ready);
        let mut slots = slots_of(&mut self.runs, &group.members);
        let mut trainers: Vec<&mut RunTrainer> = slots.iter_mut().map(|s| &mut s.run).collect();
        let stepped = group.step(&mut trainers, &moves);
        drop(trainers);
        match stepped {
            Ok((out, captured)) => {
                if captured {
                    for slot in slots.iter_mut() {
                        slot.run.graph_captured();
                    }
                }
                for (r, slot) in slots.into_iter().enumerate().filter(|&(r, _)| moves[r]) {
                    match slot.run.grouped_step_taken(out.run(r)) {
                        Ok(true) => slot.show(),
                        Ok(false) => {}
                        Err(e) => fail(slot, e),
                    }
                }
            }
            Err(e) => {
                for slot in slots {
                    fail(slot, anyhow::anyhow!("the grouped step of its runs failed: {e:#}"));
                }
            }
        }
    }

    /// Form the groups anew after runs joined or left: every run in one group, the runs
    /// that share a shape, may share a step ([`RunTrainer::shares_group`]) and can all be
    /// captured as a CUDA graph or all not, together, in
    /// the order they joined, every other run in a group of its own. A group whose
    /// members are unchanged is kept as it is (its captured graph too); the others are
    /// built afresh, their members' learners moving into the new group's buffers, and the
    /// device memory the dropped groups held goes back to the device. A group that cannot
    /// be built stops its runs.
    fn regroup(&mut self) {
        // Runs share a group when they share a shape and whether their step can be a
        // CUDA graph: a run that cannot (the in-RAM replay, `cuda_graph = false`) would
        // keep its whole group from one.
        let mut wanted: Vec<(Option<(GroupShape, bool)>, Vec<RunId>)> = Vec::new();
        for s in self.runs.iter().filter(|s| !s.failed) {
            let shape = s.run.shares_group().then(|| (s.run.group_shape(), s.run.allows_graph()));
            match wanted.iter_mut().find(|(w, _)| w.is_some() && *w == shape) {
                Some((_, ids)) => ids.push(s.id),
                None => wanted.push((shape, vec![s.id])),
            }
        }
        let mut old = std::mem::take(&mut self.groups);
        let mut rebuilt = false;
        for (_, ids) in wanted {
            if let Some(i) = old.iter().position(|g| g.members == ids) {
                self.groups.push(old.swap_remove(i));
                continue;
            }
            rebuilt = true;
            let mut slots = slots_of(&mut self.runs, &ids);
            let mut trainers: Vec<&mut RunTrainer> = slots.iter_mut().map(|s| &mut s.run).collect();
            match TrainGroup::new(ids, &mut trainers) {
                Ok(g) => {
                    if g.members.len() > 1 {
                        tracing::info!(runs = ?trainers.iter().map(|t| t.name()).collect::<Vec<_>>(), "runs train as one step");
                    }
                    self.groups.push(g);
                }
                Err(e) => {
                    drop(trainers);
                    for slot in slots {
                        fail(slot, anyhow::anyhow!("its group could not be formed: {e:#}"));
                    }
                }
            }
        }
        // The groups left in `old` go now, their graphs with them: their memory goes back.
        let dropped = !old.is_empty();
        drop(old);
        if (rebuilt || dropped) && self.device.is_cuda() {
            if let Err(e) = crate::trainer::cuda_graph::empty_cache() {
                tracing::warn!("could not return the dropped groups' memory to the device: {e:#}");
            }
        }
        for s in &mut self.runs {
            s.show();
        }
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Batch(id, b) => match self.runs.iter_mut().find(|s| s.id == id) {
                Some(slot) => slot.pending.push_back(b),
                // The run was removed or failed after this upload was reserved; its
                // queue counter went with it.
                None => tracing::warn!(run = id, "an upload arrived for a run no longer on the device; dropped"),
            },
            Msg::Add(id, run, shared) => {
                tracing::info!(run = %run.name(), weight = run.weight(), "run joined the device");
                self.sched.add(id);
                self.runs.push(Slot { id, run: *run, shared, pending: VecDeque::new(), failed: false });
                self.regroup();
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
                        slot.run.set_group(None);
                        self.regroup();
                        slot.show();
                        slot.shared.ended();
                        tracing::info!(run = %slot.run.name(), "run left the device");
                        r
                    }
                };
                let _ = reply.send(r);
            }
            Msg::Barrier(reply) => {
                for slot in &mut self.runs {
                    slot.run.count_steps();
                    slot.show();
                }
                let _ = reply.send(());
            }
        }
    }

    /// Move run `i`'s pending uploads into its replay while its limiter takes them
    /// (`all`: regardless, for a stop).
    fn take_pending(&mut self, i: usize, all: bool) {
        let slot = &mut self.runs[i];
        let mut took = false;
        while all || slot.run.takes_inserts() {
            let Some(b) = slot.pending.pop_front() else { break };
            let n = b.count() as u64;
            let r = slot.run.ingest(b);
            // In the replay or refused: either way no longer queued.
            slot.shared.queued.fetch_sub(n, Ordering::AcqRel);
            if let Err(e) = r {
                fail(slot, e);
                return;
            }
            took = true;
        }
        if took {
            slot.show();
        }
    }

    /// Graceful stop: the HTTP side has stopped answering, so everything acknowledged
    /// is queued; all of it goes into the replays (and the counters) before each run's
    /// final checkpoint, paused or not. Every run gets its checkpoint even if another's
    /// fails.
    fn finish(&mut self) -> anyhow::Result<()> {
        while let Ok(m) = self.rx.try_recv() {
            self.handle(m);
        }
        let mut first_err = None;
        for i in 0..self.runs.len() {
            self.take_pending(i, true);
            let slot = &mut self.runs[i];
            if slot.failed {
                continue; // nothing trustworthy to write
            }
            let r = slot.run.final_checkpoint();
            slot.show();
            if let Err(e) = r {
                tracing::error!(run = %slot.run.name(), "{e:#}");
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// A run's step or insert failed: it stops taking uploads and steps; the rest go on.
fn fail(slot: &mut Slot, e: anyhow::Error) {
    tracing::error!(run = %slot.run.name(), "run stopped: {e:#}");
    slot.failed = true;
    slot.shared.run_stop.store(true, Ordering::Release);
    slot.shared.ended();
    // Its queued uploads will never go in: the queue counter says so.
    let lost: u64 = slot.pending.drain(..).map(|b| b.count() as u64).sum();
    slot.shared.queued.fetch_sub(lost, Ordering::AcqRel);
}

/// One run on a device of its own: what tests, tools and benchmarks use. Dropping it
/// stops the thread and waits for it (final checkpoint).
pub struct Solo {
    device: Device,
    handle: RunHandle,
}

impl Solo {
    /// Start a device thread with one run on it, named "default". Errors: bad config, a
    /// replay that does not fit, an unreadable checkpoint or one for another action set.
    pub fn start(
        cfg: TrainerConfig,
        replay: crate::storage::replay::ReplayConfig,
        dqn: DqnConfig,
        actions: ActionSet,
        device: tch::Device,
        restore: Restore,
        publish: impl Fn(Published) + Send + 'static,
    ) -> anyhow::Result<Solo> {
        let dev = Device::start(&cfg, device)?;
        let setup = RunSetup { name: "default".into(), weight: 1.0, trainer: cfg, replay, dqn, actions, side: shine_agent::Side::Fox, restore };
        let handle = dev.add_run(setup, false, publish)?;
        Ok(Solo { device: dev, handle })
    }

    /// Reserve room and queue `batch` at once (tests and tools; the API reserves first).
    pub fn try_ingest(&self, batch: Batch) -> Result<(), IngestError> {
        self.handle.reserve(batch.count() as u64)?.ingest(batch)
    }
    pub fn stats(&self) -> TrainerStats {
        self.handle.stats()
    }
    pub fn handle(&self) -> RunHandle {
        self.handle.clone()
    }
    /// Stop after the current step, write the final checkpoint, join the thread.
    pub fn shutdown(self) -> anyhow::Result<()> {
        self.device.shutdown()
    }
}

#[cfg(test)]
mod tests;
