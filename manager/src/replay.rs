//! The experience replay: a FIFO ring of `capacity` transitions (57 f32 each, the
//! wire layout of [`shine_agent::experience`]) sampled uniformly with replacement.
//!
//! Two implementations behind one [`Replay`] enum, chosen by [`ReplayConfig::kind`]:
//!
//! - [`DeviceReplay`] (the paper's in-GPU replay, the default): the ring is one
//!   `[capacity, 57]` tensor on the training device. New rows wait in a host staging
//!   buffer until `update_size` of them are there, then go to the device as one block
//!   (one host-to-device copy; two when the block straddles the end of the ring).
//!   Sampling is `randint` + `index_select` on the device: a train step takes no input
//!   from the host and never waits for it.
//! - [`HostReplay`] (the paper's in-RAM baseline): the ring is a `Vec<f32>`; each
//!   sample draws indices on the CPU, gathers the rows and copies the batch to the
//!   device. Adding is a `memcpy`; every train step pays a transfer.
//!
//! The same code runs on CUDA and on the CPU: on the CPU the "device" ring is simply
//! a tensor in RAM. [`Replay::len`] counts only the rows sampling can see: with the
//! device replay, rows still staged on the host are not yet part of it.

use serde::{Deserialize, Serialize};
use shine_agent::experience::TRANSITION_FLOATS;
use tch::{Device, Kind, Tensor};
use thiserror::Error;

const W: usize = TRANSITION_FLOATS;
/// Bytes of one stored transition.
pub const BYTES_PER_EXPERIENCE: usize = W * std::mem::size_of::<f32>();

/// Where the ring lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayKind {
    /// On the training device (CUDA when present): the paper's in-GPU replay.
    Device,
    /// In host RAM, batches copied to the device every step: the measured baseline.
    Host,
}

/// The `[replay]` section of `configs/manager.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayConfig {
    /// `device` (in-GPU, the default) or `host` (in-RAM baseline).
    pub kind: ReplayKind,
    /// Transitions kept; the oldest are overwritten first. The paper's 1,000,000 take
    /// 228 MB (57 floats x 4 bytes each).
    pub capacity: usize,
    /// Transitions queued in host memory and copied to the device as one block
    /// (device replay only; the paper measured 2,000 as the best trade between the
    /// fixed cost of a copy and the delay before new rows become sampleable).
    /// `capacity` should be a multiple of it so blocks never straddle the ring's end
    /// (other values work, at the cost of a second copy for the straddling block).
    pub update_size: usize,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { kind: ReplayKind::Device, capacity: 1_000_000, update_size: 2_000 }
    }
}

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("[replay] {0}")]
    Config(String),
    #[error("[replay] capacity {capacity} needs {need_mib} MiB on {place} but {problem}; lower [replay] capacity (each experience takes {BYTES_PER_EXPERIENCE} bytes)")]
    Memory { capacity: usize, need_mib: usize, place: String, problem: String },
    #[error("{0} floats is not a whole number of {W}-float transitions")]
    Ragged(usize),
    #[error("cannot sample: no experience is visible to sampling yet")]
    Empty,
}

impl ReplayConfig {
    pub fn validate(&self) -> Result<(), ReplayError> {
        let bad = |m: String| Err(ReplayError::Config(m));
        if self.capacity == 0 {
            return bad("capacity must be at least 1".into());
        }
        if self.update_size == 0 {
            return bad("update_size must be at least 1".into());
        }
        if self.kind == ReplayKind::Device && self.capacity < self.update_size {
            return bad(format!("capacity {} cannot hold one block of update_size {}: raise capacity or lower update_size", self.capacity, self.update_size));
        }
        if self.capacity > i64::MAX as usize / W {
            return bad(format!("capacity {} is absurdly large", self.capacity));
        }
        Ok(())
    }
}

fn mib(bytes: usize) -> usize {
    bytes.div_ceil(1 << 20)
}

/// Check that host RAM can hold `bytes`. Linux's overcommit would let a too-large
/// allocation "succeed" and the process die later on first touch, so ask
/// `/proc/meminfo` first. Where it cannot be read (not Linux), no check is made.
fn check_host_memory(capacity: usize) -> Result<(), ReplayError> {
    let bytes = capacity * BYTES_PER_EXPERIENCE;
    let available_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("MemAvailable:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())));
    match available_kib {
        Some(kib) if bytes / 1024 > kib => {
            Err(ReplayError::Memory { capacity, need_mib: mib(bytes), place: "host RAM".into(), problem: format!("only {} MiB are available", kib / 1024) })
        }
        _ => Ok(()),
    }
}

/// The ring tensor. On CUDA there is no free-memory query in tch, and the question
/// would be racy anyway: the allocation itself is the check, and libtorch's
/// out-of-memory message (which states the free memory) is passed on.
fn allocate_ring(capacity: usize, device: Device) -> Result<Tensor, ReplayError> {
    if device == Device::Cpu {
        check_host_memory(capacity)?;
    }
    // Uninitialised: rows at or past `len` are never sampled.
    Tensor::f_empty([capacity as i64, W as i64], (Kind::Float, device)).map_err(|e| ReplayError::Memory {
        capacity,
        need_mib: mib(capacity * BYTES_PER_EXPERIENCE),
        place: format!("{device:?}"),
        problem: format!("the allocation failed ({})", e.to_string().lines().next().unwrap_or("")),
    })
}

fn check_rows(rows: &[f32]) -> Result<(), ReplayError> {
    if !rows.len().is_multiple_of(W) {
        return Err(ReplayError::Ragged(rows.len()));
    }
    Ok(())
}

/// The paper's in-GPU replay.
pub struct DeviceReplay {
    /// `[capacity, 57]` on the device.
    ring: Tensor,
    /// Up to `update_size` rows waiting for the next block write.
    staging: Vec<f32>,
    capacity: usize,
    update_size: usize,
    /// Ring row the next block starts at.
    next: usize,
    /// Rows visible to sampling.
    len: usize,
    device: Device,
}

impl DeviceReplay {
    pub fn new(capacity: usize, update_size: usize, device: Device) -> Result<Self, ReplayError> {
        ReplayConfig { kind: ReplayKind::Device, capacity, update_size }.validate()?;
        let ring = allocate_ring(capacity, device)?;
        Ok(DeviceReplay { ring, staging: Vec::with_capacity(update_size * W), capacity, update_size, next: 0, len: 0, device })
    }

    /// Queue `rows` (whole transitions); every completed block of `update_size` rows
    /// is written to the device.
    pub fn push(&mut self, rows: &[f32]) -> Result<(), ReplayError> {
        check_rows(rows)?;
        let block = self.update_size * W;
        let mut rest = rows;
        while !rest.is_empty() {
            let take = (block - self.staging.len()).min(rest.len());
            self.staging.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.staging.len() == block {
                self.write_staged();
            }
        }
        Ok(())
    }

    /// Write whatever is staged (a partial block) so that sampling sees it.
    pub fn flush(&mut self) {
        self.write_staged();
    }

    fn write_staged(&mut self) {
        let n = self.staging.len() / W;
        if n == 0 {
            return;
        }
        // One host tensor for the block; `copy_` into a slice of the ring is the single
        // host-to-device transfer (two slices only when the block wraps).
        let src = Tensor::from_slice(&self.staging).view([n as i64, W as i64]);
        let first = n.min(self.capacity - self.next);
        self.ring.narrow(0, self.next as i64, first as i64).copy_(&src.narrow(0, 0, first as i64));
        if first < n {
            self.ring.narrow(0, 0, (n - first) as i64).copy_(&src.narrow(0, first as i64, (n - first) as i64));
        }
        self.next = (self.next + n) % self.capacity;
        self.len = (self.len + n).min(self.capacity);
        self.staging.clear();
    }

    /// `batch` rows drawn uniformly with replacement, `[batch, 57]` on the device.
    /// Indices are drawn on the device too: nothing waits for the host.
    pub fn sample(&self, batch: usize) -> Result<Tensor, ReplayError> {
        if self.len == 0 {
            return Err(ReplayError::Empty);
        }
        let idx = Tensor::randint(self.len as i64, [batch as i64], (Kind::Int64, self.device));
        Ok(self.ring.index_select(0, &idx))
    }

    /// Rows waiting in host memory for the next block.
    pub fn staged(&self) -> usize {
        self.staging.len() / W
    }
}

/// The paper's in-RAM baseline.
pub struct HostReplay {
    ring: Vec<f32>,
    capacity: usize,
    next: usize,
    len: usize,
    rng: rand::rngs::SmallRng,
    /// Reused gather buffer for one batch.
    gather: Vec<f32>,
    device: Device,
}

impl HostReplay {
    pub fn new(capacity: usize, device: Device) -> Result<Self, ReplayError> {
        ReplayConfig { kind: ReplayKind::Host, capacity, update_size: 1 }.validate()?;
        check_host_memory(capacity)?;
        use rand::SeedableRng;
        // `vec![0.0; n]` is a zeroed allocation: pages are only touched when written.
        Ok(HostReplay { ring: vec![0.0; capacity * W], capacity, next: 0, len: 0, rng: rand::rngs::SmallRng::from_os_rng(), gather: Vec::new(), device })
    }

    /// Append `rows` (whole transitions), overwriting the oldest when full.
    pub fn push(&mut self, rows: &[f32]) -> Result<(), ReplayError> {
        check_rows(rows)?;
        // Only the newest `capacity` rows can survive the push.
        let n = rows.len() / W;
        let skip = n.saturating_sub(self.capacity);
        let mut rest = &rows[skip * W..];
        self.next = (self.next + skip) % self.capacity;
        while !rest.is_empty() {
            let take = (self.capacity - self.next).min(rest.len() / W);
            self.ring[self.next * W..(self.next + take) * W].copy_from_slice(&rest[..take * W]);
            rest = &rest[take * W..];
            self.next = (self.next + take) % self.capacity;
        }
        self.len = (self.len + n).min(self.capacity);
        Ok(())
    }

    /// Indices drawn on the CPU, rows gathered in RAM, the batch copied to the device.
    ///
    /// The gather buffer is ordinary (pageable) memory. A pinned buffer would allow an
    /// asynchronous transfer, but tch offers no safe way to write host floats into an
    /// existing pinned tensor without an extra copy, which at 7-58 KB per batch costs
    /// about what pinning saves; and this is the paper's baseline (a feed_dict copy).
    pub fn sample(&mut self, batch: usize) -> Result<Tensor, ReplayError> {
        use rand::Rng;
        if self.len == 0 {
            return Err(ReplayError::Empty);
        }
        self.gather.clear();
        for _ in 0..batch {
            let i = self.rng.random_range(0..self.len);
            self.gather.extend_from_slice(&self.ring[i * W..(i + 1) * W]);
        }
        Ok(Tensor::from_slice(&self.gather).view([batch as i64, W as i64]).to_device(self.device))
    }
}

/// The replay the trainer owns: the device ring or the in-RAM baseline.
pub enum Replay {
    Device(DeviceReplay),
    Host(HostReplay),
}

impl Replay {
    /// Build the replay `cfg` describes for `device` (for the host kind, `device` is
    /// where sampled batches go).
    pub fn new(cfg: &ReplayConfig, device: Device) -> Result<Replay, ReplayError> {
        cfg.validate()?;
        Ok(match cfg.kind {
            ReplayKind::Device => Replay::Device(DeviceReplay::new(cfg.capacity, cfg.update_size, device)?),
            ReplayKind::Host => Replay::Host(HostReplay::new(cfg.capacity, device)?),
        })
    }

    pub fn kind(&self) -> ReplayKind {
        match self {
            Replay::Device(_) => ReplayKind::Device,
            Replay::Host(_) => ReplayKind::Host,
        }
    }

    /// Add whole transitions (`k x 57` floats).
    pub fn push(&mut self, rows: &[f32]) -> Result<(), ReplayError> {
        match self {
            Replay::Device(r) => r.push(rows),
            Replay::Host(r) => r.push(rows),
        }
    }

    /// Rows visible to sampling.
    pub fn len(&self) -> usize {
        match self {
            Replay::Device(r) => r.len,
            Replay::Host(r) => r.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        match self {
            Replay::Device(r) => r.capacity,
            Replay::Host(r) => r.capacity,
        }
    }

    /// Rows added but not yet visible to sampling (device replay's staging).
    pub fn staged(&self) -> usize {
        match self {
            Replay::Device(r) => r.staged(),
            Replay::Host(_) => 0,
        }
    }

    /// `[batch, 57]` on the training device, uniform with replacement.
    pub fn sample(&mut self, batch: usize) -> Result<Tensor, ReplayError> {
        match self {
            Replay::Device(r) => r.sample(batch),
            Replay::Host(r) => r.sample(batch),
        }
    }

    /// Make staged rows visible to sampling (tests, benchmarks).
    pub fn flush(&mut self) {
        match self {
            Replay::Device(r) => r.flush(),
            Replay::Host(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Row `i`: every float is `i` plus the column / 100, so a row names itself.
    fn rows(range: std::ops::Range<usize>) -> Vec<f32> {
        range.flat_map(|i| (0..W).map(move |c| i as f32 + c as f32 / 100.0)).collect()
    }

    /// The id of each ring slot (`None` for a slot whose row is malformed).
    fn ring_ids(r: &Replay) -> Vec<usize> {
        let flat: Vec<f32> = match r {
            Replay::Device(d) => Vec::<f32>::try_from(&d.ring.view([-1])).unwrap(),
            Replay::Host(h) => h.ring.clone(),
        };
        flat.chunks_exact(W).take(r.len()).map(|row| row_id(row).expect("a whole inserted row")).collect()
    }

    fn row_id(row: &[f32]) -> Option<usize> {
        let id = row[0];
        (id.fract() == 0.0 && row.iter().enumerate().all(|(c, &v)| v == id + c as f32 / 100.0)).then_some(id as usize)
    }

    fn device(capacity: usize, update_size: usize) -> Replay {
        Replay::new(&ReplayConfig { kind: ReplayKind::Device, capacity, update_size }, Device::Cpu).unwrap()
    }

    fn host(capacity: usize) -> Replay {
        Replay::new(&ReplayConfig { kind: ReplayKind::Host, capacity, update_size: 1 }, Device::Cpu).unwrap()
    }

    #[test]
    fn fifo_order_and_wrap_around_for_both_kinds() {
        for mut r in [device(10, 2), host(10)] {
            // One row at a time, 13 rows into 10 slots: rows 10..13 replace 0..3.
            for i in 0..13 {
                r.push(&rows(i..i + 1)).unwrap();
            }
            r.flush();
            assert_eq!(r.len(), 10);
            assert_eq!(ring_ids(&r), vec![10, 11, 12, 3, 4, 5, 6, 7, 8, 9], "{:?}", r.kind());
        }
    }

    #[test]
    fn block_writes_land_where_they_should_across_the_ring_end() {
        let mut r = device(10, 4);
        r.push(&rows(0..3)).unwrap();
        assert_eq!((r.len(), r.staged()), (0, 3), "a partial block stays on the host");
        r.push(&rows(3..9)).unwrap(); // completes block 0..4, stages 4..9 partly
        assert_eq!((r.len(), r.staged()), (8, 1));
        assert_eq!(ring_ids(&r), (0..8).collect::<Vec<_>>());
        r.push(&rows(9..12)).unwrap(); // block 8..12 straddles the end: slots 8, 9, 0, 1
        assert_eq!((r.len(), r.staged()), (10, 0));
        assert_eq!(ring_ids(&r), vec![10, 11, 2, 3, 4, 5, 6, 7, 8, 9]);
        let Replay::Device(d) = &r else { unreachable!() };
        assert_eq!(d.next, 2);
        // A push bigger than the ring: only the newest rows survive, in order.
        r.push(&rows(100..125)).unwrap();
        r.flush();
        let mut got = ring_ids(&r);
        got.sort();
        assert_eq!(got, (115..125).collect::<Vec<_>>());
    }

    #[test]
    fn host_push_larger_than_capacity_keeps_the_newest() {
        let mut r = host(10);
        r.push(&rows(0..4)).unwrap();
        r.push(&rows(4..27)).unwrap();
        assert_eq!(r.len(), 10);
        // Next write position continues from where 27 rows would have put it.
        assert_eq!(ring_ids(&r), vec![20, 21, 22, 23, 24, 25, 26, 17, 18, 19]);
    }

    #[test]
    fn sampled_rows_are_rows_that_were_inserted_and_still_visible() {
        tch::manual_seed(11);
        for mut r in [device(20, 5), host(20)] {
            r.push(&rows(0..33)).unwrap(); // host keeps rows 13..33; device has 10..30 visible, 3 staged
            let visible: HashSet<usize> = ring_ids(&r).into_iter().collect();
            let b = r.sample(2000).unwrap();
            assert_eq!(b.size(), vec![2000, W as i64]);
            let flat = Vec::<f32>::try_from(&b.view([-1])).unwrap();
            let seen: HashSet<usize> = flat.chunks_exact(W).map(|row| row_id(row).expect("a whole inserted row")).collect();
            assert!(seen.is_subset(&visible), "{:?}: sampled {seen:?}, visible {visible:?}", r.kind());
            // Uniform over all of them: 2000 draws from 20 rows miss one with p ~ 1e-44.
            assert_eq!(seen, visible, "{:?}", r.kind());
            assert!(seen.iter().all(|&i| i >= 10), "{:?}: overwritten rows were sampled", r.kind());
        }
    }

    #[test]
    fn len_counts_only_rows_visible_to_sampling() {
        let mut r = device(8, 4);
        r.push(&rows(0..3)).unwrap();
        assert_eq!(r.len(), 0);
        assert!(matches!(r.sample(4), Err(ReplayError::Empty)));
        r.push(&rows(3..4)).unwrap();
        assert_eq!(r.len(), 4);
        assert!(r.sample(4).is_ok());
        assert!(matches!(host(4).sample(1), Err(ReplayError::Empty)));
    }

    #[test]
    fn impossible_configs_are_clear_errors() {
        let err = |kind, capacity, update_size| Replay::new(&ReplayConfig { kind, capacity, update_size }, Device::Cpu).err().expect("rejected").to_string();
        let e = err(ReplayKind::Device, 1000, 2000);
        assert!(e.contains("cannot hold one block") && e.contains("update_size 2000"), "{e}");
        assert!(err(ReplayKind::Device, 1000, 0).contains("update_size must be at least 1"));
        assert!(err(ReplayKind::Host, 0, 1).contains("capacity must be at least 1"));
        // 10^12 experiences = 212 TiB: more than this (or any) machine has.
        for kind in [ReplayKind::Device, ReplayKind::Host] {
            let e = err(kind, 1_000_000_000_000, 2000);
            assert!(e.contains("MiB") && e.contains("lower [replay] capacity"), "{e}");
        }
    }

    #[test]
    fn ragged_pushes_are_errors_and_change_nothing() {
        for mut r in [device(10, 2), host(10)] {
            assert!(matches!(r.push(&[1.0; W + 1]), Err(ReplayError::Ragged(58))));
            r.flush();
            assert_eq!(r.len(), 0);
        }
    }

    #[test]
    fn config_defaults_are_the_papers_and_unknown_fields_are_rejected() {
        let c: ReplayConfig = serde_json::from_str(r#"{"kind": "host"}"#).unwrap();
        assert_eq!((c.kind, c.capacity, c.update_size), (ReplayKind::Host, 1_000_000, 2_000));
        assert!(serde_json::from_str::<ReplayConfig>(r#"{"capacity": 10, "updatesize": 2}"#).is_err());
    }
}
