//! Transitions into batches for the uploader: one model version a batch, flushed by
//! size or age, handed over on a bounded channel (which is how a busy manager pauses
//! the actor).

use crate::pipeline::nstep::Row;
use crate::pipeline::shared::ActorCounters;
use shine_agent::experience::TRANSITION_FLOATS;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whole transitions played by one model, on their way to the uploader.
#[derive(Debug, Clone, PartialEq)]
pub struct RawBatch {
    /// `count x 57` floats.
    pub data: Vec<f32>,
    pub model_version: u64,
    pub n_step: u8,
}

impl RawBatch {
    pub fn count(&self) -> usize {
        self.data.len() / TRANSITION_FLOATS
    }
}

/// Collects transitions into batches of one model version, flushed by size or age.
pub struct Batcher {
    data: Vec<f32>,
    version: u64,
    started: Option<Instant>,
    max_transitions: usize,
    max_age: Duration,
    /// The most transitions a batch may grow to when the manager is busy.
    cap: usize,
    n_step: u8,
    out: tokio::sync::mpsc::Sender<RawBatch>,
    counters: Arc<ActorCounters>,
}

impl Batcher {
    pub fn new(max_transitions: usize, max_age: Duration, n_step: u8, out: tokio::sync::mpsc::Sender<RawBatch>, counters: Arc<ActorCounters>) -> Self {
        let max_transitions = max_transitions.clamp(1, shine_agent::experience::MAX_COUNT as usize);
        Batcher { data: Vec::new(), version: 0, started: None, max_transitions, max_age, cap: max_transitions, n_step, out, counters }
    }

    /// Let batches grow to `cap` transitions while the manager is busy (never past the
    /// format's count; never below the size asked).
    pub fn with_cap(mut self, cap: usize) -> Self {
        self.cap = cap.clamp(self.max_transitions, shine_agent::experience::MAX_COUNT as usize);
        self
    }

    /// This batch's size and age: the manager's, scaled up while it is busy.
    fn limits(&self) -> (usize, Duration) {
        let scale = self.counters.batch_scale.load(Relaxed).max(1) as usize;
        let size = self.max_transitions.saturating_mul(scale).min(self.cap);
        (size, self.max_age.mul_f64((size as f64 / self.max_transitions as f64).max(1.0)))
    }

    /// Add one transition chosen by model `version`. A batch holds one version only,
    /// so that its header tells the manager exactly which model played it.
    pub fn push(&mut self, row: &Row, version: u64) -> anyhow::Result<()> {
        if !self.data.is_empty() && version != self.version {
            self.flush()?;
        }
        if self.data.is_empty() {
            self.version = version;
            self.started = Some(Instant::now());
        }
        self.data.extend_from_slice(row);
        if self.data.len() / TRANSITION_FLOATS >= self.limits().0 {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush_if_due(&mut self, now: Instant) -> anyhow::Result<()> {
        match self.started {
            Some(t) if now.duration_since(t) >= self.limits().1 => self.flush(),
            _ => Ok(()),
        }
    }

    pub fn flush(&mut self) -> anyhow::Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.data, Vec::with_capacity(self.max_transitions.min(4096) * TRANSITION_FLOATS));
        let batch = RawBatch { data, model_version: self.version, n_step: self.n_step };
        let count = batch.count() as u64;
        self.started = None;
        // Blocking on a full channel is right: it fills when the manager is behind (the
        // spooler then waits) or the disk cannot keep up, and playing on would only
        // make gameplay the spool must hold or drop.
        self.out.blocking_send(batch).map_err(|_| anyhow::anyhow!("the uploader stopped; cannot hand over transitions"))?;
        self.counters.transitions.fetch_add(count, Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::nstep::transition_row;
    use shine_agent::STATE_DIM;

    fn st(v: f32) -> [f32; STATE_DIM] {
        [v; STATE_DIM]
    }

    #[test]
    fn batcher_splits_by_size_and_by_model_version() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let counters = Arc::new(ActorCounters::default());
        let mut b = Batcher::new(3, Duration::from_secs(3600), 2, tx, counters.clone());
        let row = |v: f32| transition_row(&st(v), 0, v, &st(v), false);
        for i in 0..4 {
            b.push(&row(i as f32), 1).unwrap();
        }
        b.push(&row(9.0), 2).unwrap();
        b.flush().unwrap();
        b.flush().unwrap();
        let got: Vec<(usize, u64, u8)> = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| (b.count(), b.model_version, b.n_step)).collect();
        assert_eq!(got, vec![(3, 1, 2), (1, 1, 2), (1, 2, 2)], "full batch, then a version change, then the final flush");
        assert_eq!(counters.transitions.load(Relaxed), 5);
    }

    #[test]
    fn a_busy_manager_gets_larger_batches_up_to_the_cap() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let counters = Arc::new(ActorCounters::default());
        let mut b = Batcher::new(2, Duration::from_secs(3600), 1, tx, counters.clone()).with_cap(5);
        let row = transition_row(&st(1.0), 0, 1.0, &st(1.0), false);
        counters.batch_scale.store(2, Relaxed);
        for _ in 0..4 {
            b.push(&row, 1).unwrap();
        }
        counters.batch_scale.store(16, Relaxed); // 32 asked: the cap (5) holds
        for _ in 0..5 {
            b.push(&row, 1).unwrap();
        }
        counters.batch_scale.store(1, Relaxed);
        for _ in 0..2 {
            b.push(&row, 1).unwrap();
        }
        let got: Vec<usize> = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| b.count()).collect();
        assert_eq!(got, vec![4, 5, 2]);
    }
}
