//! A run's handle on the device: what the run layer holds ([`RunHandle`]) to queue
//! uploads for the device thread, read the run's live numbers and pause it; the room an
//! upload takes in the queue ([`Reservation`]); and the messages the device thread is
//! sent (`Msg`).
//!
//! The queue is bounded in transitions (`[trainer] ingest_queue_transitions`, and
//! `insert_slack` while the rate limiter holds the fleet back): that is the
//! back-pressure point. A full queue becomes a 503 and the worker's spool keeps the data
//! until it retries, and it is what makes a 202 mean "in the replay within the rate
//! limiter's window".

use crate::trainer::{RunTrainer, TrainerStats};
use shine_agent::experience::Batch;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, SyncSender};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// A run's number on this device (names can be reused after a removal; ids are not).
pub type RunId = u64;

/// What the device thread is told.
pub(super) enum Msg {
    /// An accepted upload for a run's replay.
    Batch(RunId, Batch),
    /// A run joins the device, with the state its handles share.
    Add(RunId, Box<RunTrainer>, Arc<Shared>),
    /// A run leaves: its queue drained, a final checkpoint; the result is sent back.
    Remove(RunId, SyncSender<anyhow::Result<()>>),
    /// Answered between two steps: whatever step was in flight has finished, and every
    /// run's numbers are up to date.
    Barrier(SyncSender<()>),
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum IngestError {
    /// The run's queue is full: try again later (HTTP 503).
    #[error("the trainer's ingest queue is full")]
    Full,
    /// The run's trainer has stopped (shutting down, removed, or it failed).
    #[error("the trainer is not running")]
    Stopped,
}

/// What a run's handles and the device thread share about it.
pub(super) struct Shared {
    /// The run's numbers as the device thread last copied them from its trainer.
    pub(super) stats: Mutex<TrainerStats>,
    /// Set when the whole device stops (shutdown, or its thread failed).
    pub(super) device_stop: Arc<AtomicBool>,
    /// Set when this run alone has stopped (removed, or its step failed).
    pub(super) run_stop: AtomicBool,
    /// While set the device thread takes no train step for this run (its queue still
    /// drains into the replay).
    pub(super) paused: AtomicBool,
    rejected: AtomicU64,
    /// Transitions reserved or queued and not yet in the replay.
    pub(super) queued: AtomicU64,
    capacity: u64,
}

impl Shared {
    pub(super) fn new(stats: TrainerStats, device_stop: Arc<AtomicBool>, capacity: u64) -> Shared {
        Shared {
            stats: Mutex::new(stats),
            device_stop,
            run_stop: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            rejected: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            capacity,
        }
    }

    fn stopped(&self) -> bool {
        self.device_stop.load(Ordering::Acquire) || self.run_stop.load(Ordering::Acquire)
    }

    /// The run's trainer has ended: its handles say so from now on.
    pub(super) fn ended(&self) {
        self.stats.lock().expect("stats lock").running = false;
    }
}

/// The cloneable side of one run on the device: what the run layer needs.
#[derive(Clone)]
pub struct RunHandle {
    pub(super) run: RunId,
    pub(super) tx: Sender<Msg>,
    pub(super) shared: Arc<Shared>,
}

impl RunHandle {
    /// Room for `count` transitions in the ingest queue, or `Full` (HTTP 503). Decided
    /// before the upload is decompressed; the room is given back if the reservation is
    /// dropped unused (the upload turned out invalid or a repeat). An empty queue always
    /// takes one upload, however large, so no valid upload waits forever.
    pub fn reserve(&self, count: u64) -> Result<Reservation, IngestError> {
        if self.shared.stopped() {
            return Err(IngestError::Stopped);
        }
        let cap = self.shared.capacity;
        let got = self.shared.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| (q == 0 || q + count <= cap).then_some(q + count));
        match got {
            Ok(_) => Ok(Reservation { handle: self.clone(), count, used: false }),
            Err(_) => {
                self.shared.rejected.fetch_add(1, Ordering::Relaxed);
                Err(IngestError::Full)
            }
        }
    }

    /// Transitions queued for the replay right now.
    pub fn queued(&self) -> u64 {
        self.shared.queued.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> TrainerStats {
        let mut s = self.shared.stats.lock().expect("stats lock").clone();
        s.ingest_rejected = self.shared.rejected.load(Ordering::Relaxed);
        s.queued = self.queued();
        s.paused = self.is_paused();
        s
    }

    /// Stop or restart this run's train steps (uploads already queued still go in).
    /// The device thread sees it before its next step; [`super::Device::barrier`]
    /// waits for a step in flight.
    pub fn set_paused(&self, paused: bool) {
        self.shared.paused.store(paused, Ordering::Release);
    }

    pub fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::Acquire)
    }
}

/// Room in the ingest queue for one upload ([`RunHandle::reserve`]).
pub struct Reservation {
    handle: RunHandle,
    count: u64,
    used: bool,
}

impl Reservation {
    /// Queue the validated batch in the reserved room (its count must be the reserved one).
    pub fn ingest(mut self, batch: Batch) -> Result<(), IngestError> {
        debug_assert_eq!(batch.count() as u64, self.count);
        self.handle.tx.send(Msg::Batch(self.handle.run, batch)).map_err(|_| IngestError::Stopped)?;
        // The device thread gives the room back once the batch is in the replay.
        self.used = true;
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.used {
            self.handle.shared.queued.fetch_sub(self.count, Ordering::AcqRel);
        }
    }
}
