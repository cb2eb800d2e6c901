//! The experience replay: a FIFO ring of `capacity` transitions sampled with
//! replacement, uniformly or by priority ([`Sampling`]; the priorities are
//! [`crate::storage::prioritized`]'s). Transitions come in the wire layout of
//! [`shine_agent::experience`] (57 f32) and are kept as the learner reads them: device
//! rows of 64 f32 ([`shine_agent::dqn::row`]: the state padded with the first layer's
//! bias input, the discount `gamma^n (1 - terminal)` in place of the terminal flag),
//! converted once, as they go in.
//!
//! Two implementations behind one [`Replay`] enum, chosen by [`ReplayConfig::kind`]:
//!
//! - [`DeviceReplay`] (the paper's in-GPU replay, the default): the ring is one
//!   `[capacity, 64]` tensor on the training device. New rows wait in a host staging
//!   buffer until `update_size` of them are there, then go to the device as one block
//!   (one host-to-device copy; two when the block straddles the end of the ring).
//!   Sampling is `randint`, a `remainder` by the fill level (a tensor on the device,
//!   written in place after each block) and `index_select`, all on the device: a train
//!   step takes no input from the host, never waits for it, and is captured once as a
//!   CUDA graph for the run's life, however the ring fills after.
//! - [`HostReplay`] (the paper's in-RAM baseline): the ring is a `Vec<f32>`; each
//!   sample draws indices on the CPU, gathers the rows and copies the batch to the
//!   device. Adding is a `memcpy`; every train step pays a transfer.
//!
//! Both kinds sample by priority with the same [`Priorities`]: the device replay holds
//! them on the device beside the ring; the in-RAM baseline holds them in RAM, draws
//! there and gathers the rows as for uniform sampling.
//!
//! The same code runs on CUDA and on the CPU: on the CPU the "device" ring is simply
//! a tensor in RAM. [`Replay::len`] counts only the rows sampling can see: with the
//! device replay, rows still staged on the host are not yet part of it.

use crate::storage::prioritized::{Drawn, Priorities};
use serde::{Deserialize, Serialize};
use shine_agent::dqn::row;
use shine_agent::experience::TRANSITION_FLOATS;
use tch::{Device, Kind, Tensor};
use thiserror::Error;

/// Floats of a wire transition (what is pushed).
const W: usize = TRANSITION_FLOATS;
/// Floats of a stored transition: a device row ([`row`]).
const R: usize = row::WIDTH;
/// Bytes of one stored transition.
pub const BYTES_PER_EXPERIENCE: usize = R * std::mem::size_of::<f32>();

/// Where the ring lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayKind {
    /// On the training device (CUDA when present): the paper's in-GPU replay.
    Device,
    /// In host RAM, batches copied to the device every step: the measured baseline.
    Host,
}

/// How a train step draws its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampling {
    /// Every row equally likely (DQN's replay).
    Uniform,
    /// Proportional prioritized replay (Schaul et al. 2016): rows by their last TD
    /// error, the bias corrected by importance weights.
    Prioritized,
}

/// Prioritized only: the priority a row enters the replay with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NewPriority {
    /// The largest priority so far (Schaul et al.): every new row is drawn soon.
    Max,
    /// Its |TD error| when it arrives, under the learner's target network (Ape-X's
    /// choice, whose actors compute it with their own copy of the model).
    Td,
}

/// The `[replay]` section of `configs/manager.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayConfig {
    /// `device` (in-GPU, the default) or `host` (in-RAM baseline).
    pub kind: ReplayKind,
    /// Transitions kept; the oldest are overwritten first. The paper's 1,000,000 take
    /// 256 MB (64 floats x 4 bytes each: the paper's 57, padded for aligned rows).
    pub capacity: usize,
    /// Transitions queued in host memory and copied to the device as one block
    /// (device replay only; the paper measured 2,000 as the best trade between the
    /// fixed cost of a copy and the delay before new rows become sampleable).
    /// `capacity` should be a multiple of it so blocks never straddle the ring's end
    /// (other values work, at the cost of a second copy for the straddling block).
    pub update_size: usize,
    /// `uniform` (the default) or `prioritized`.
    pub sampling: Sampling,
    /// Prioritized only: row `i` is drawn with probability proportional to
    /// `(|TD error| + priority_eps)^alpha`; 0 is uniform, 1 fully proportional
    /// (Schaul et al. and Ape-X: 0.6).
    pub alpha: f64,
    /// Prioritized only: the importance-sampling exponent at the first train step
    /// (Schaul et al.: 0.4); it rises linearly to 1 (full correction) over `beta_steps`.
    pub beta: f64,
    /// Prioritized only: train steps over which `beta` rises to 1; 0 keeps it constant
    /// (Ape-X's choice).
    pub beta_steps: u64,
    /// Prioritized only: added to every |TD error| so that no row becomes undrawable.
    pub priority_eps: f64,
    /// Prioritized only: `max` (the default) or `td`, the priority a new row enters with.
    pub new_priority: NewPriority,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            kind: ReplayKind::Device,
            capacity: 1_000_000,
            update_size: 2_000,
            sampling: Sampling::Uniform,
            alpha: 0.6,
            beta: 0.4,
            beta_steps: 1_000_000,
            priority_eps: 1e-3,
            new_priority: NewPriority::Max,
        }
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
    #[error("{rows} transitions came with {scores} TD errors")]
    Scores { rows: usize, scores: usize },
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
        if self.capacity > i64::MAX as usize / R {
            return bad(format!("capacity {} is absurdly large", self.capacity));
        }
        if !(0.0..=1.0).contains(&self.alpha) {
            return bad(format!("alpha {} must be between 0 (uniform) and 1 (fully proportional)", self.alpha));
        }
        if !(0.0..=1.0).contains(&self.beta) {
            return bad(format!("beta {} must be between 0 (no correction) and 1 (full correction)", self.beta));
        }
        if !(self.priority_eps > 0.0 && self.priority_eps.is_finite()) {
            return bad(format!("priority_eps {} must be a positive number (a row at priority 0 could never be drawn again)", self.priority_eps));
        }
        Ok(())
    }

    /// The priorities of a ring on `device`, when sampling is prioritized.
    fn priorities(&self, device: Device) -> Option<Priorities> {
        (self.sampling == Sampling::Prioritized).then(|| Priorities::new(self.capacity, self.alpha, self.priority_eps, self.beta, self.beta_steps, device))
    }
}

/// A sampled batch (tests; a train step draws into its group's buffers,
/// [`Replay::draw_into`]).
pub struct Sampled {
    /// `[batch, 64]` device rows ([`row`]) on the training device.
    pub rows: Tensor,
    /// With prioritized sampling: the rows' ring indices and importance weights (on
    /// the training device), for the learner's weighted loss and
    /// [`Replay::update_priorities`].
    pub drawn: Option<Drawn>,
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
    // Uninitialised: rows at or past `len` are never sampled into a step that moves (an
    // empty ring draws row 0 for a run held back by its group's mask, which reads
    // nothing of it).
    Tensor::f_empty([capacity as i64, R as i64], (Kind::Float, device)).map_err(|e| ReplayError::Memory {
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

/// [`check_rows`], and one |TD error| per row.
fn check_scored(rows: &[f32], td: &[f32]) -> Result<(), ReplayError> {
    check_rows(rows)?;
    if td.len() != rows.len() / W {
        return Err(ReplayError::Scores { rows: rows.len() / W, scores: td.len() });
    }
    Ok(())
}

/// The largest value `randint` draws from: the random numbers a draw reduces modulo the
/// fill level. 2^62: the reduction's bias (at most the fill level over 2^62) is nothing,
/// and where a float draw scaled by the fill level would round onto the level itself
/// or have too few bits for a million rows (a float32 has 24), a remainder has neither.
pub const DRAW_RANGE: i64 = 1 << 62;

/// The paper's in-GPU replay.
pub struct DeviceReplay {
    /// `[capacity, 64]` device rows ([`row`]) on the device.
    ring: Tensor,
    /// Up to `update_size` device rows waiting for the next block write.
    staging: Vec<f32>,
    /// Their |TD errors| for the priorities (NaN: enter at the running maximum).
    staging_td: Vec<f32>,
    capacity: usize,
    update_size: usize,
    /// Ring row the next block starts at.
    next: usize,
    /// Rows visible to sampling.
    len: usize,
    /// The fill level on the device, as a draw reads it: `max(len, 1)` (0-dimensional
    /// int64), written in place after each block (never reassigned), so a step captured
    /// once as a CUDA graph draws from every row written since. At least 1, so that no
    /// index can reach beyond the ring: an empty ring draws its row 0, for a run held
    /// back until its burn-in is done.
    fill: Tensor,
    /// The run's `gamma^n_step`, which each row's discount column carries ([`row`]).
    gamma_n: f32,
    device: Device,
    /// With prioritized sampling: the rows' priorities, on the device.
    prio: Option<Priorities>,
}

impl DeviceReplay {
    /// A ring for a run whose bootstrap is discounted `gamma_n` (`gamma^n_step`).
    pub fn new(capacity: usize, update_size: usize, gamma_n: f64, device: Device) -> Result<Self, ReplayError> {
        ReplayConfig { kind: ReplayKind::Device, capacity, update_size, ..Default::default() }.validate()?;
        let ring = allocate_ring(capacity, device)?;
        let fill = Tensor::ones([], (Kind::Int64, device));
        Ok(DeviceReplay {
            ring,
            staging: Vec::with_capacity(update_size * R),
            staging_td: Vec::with_capacity(update_size),
            capacity,
            update_size,
            next: 0,
            len: 0,
            fill,
            gamma_n: gamma_n as f32,
            device,
            prio: None,
        })
    }

    /// Queue `rows` (whole wire transitions) with their |TD errors| `td` (one per row,
    /// NaN for "at the running maximum"); every completed block of `update_size` rows is
    /// written to the device.
    pub fn push(&mut self, rows: &[f32], td: &[f32]) -> Result<(), ReplayError> {
        check_scored(rows, td)?;
        let mut rest = (rows, td);
        while !rest.1.is_empty() {
            let take = (self.update_size - self.staging_td.len()).min(rest.1.len());
            row::from_wire(&rest.0[..take * W], self.gamma_n, &mut self.staging);
            self.staging_td.extend_from_slice(&rest.1[..take]);
            rest = (&rest.0[take * W..], &rest.1[take..]);
            if self.staging_td.len() == self.update_size {
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
        let n = self.staging.len() / R;
        if n == 0 {
            return;
        }
        // One host tensor for the block; `copy_` into a slice of the ring is the single
        // host-to-device transfer (two slices only when the block wraps).
        let src = Tensor::from_slice(&self.staging).view([n as i64, R as i64]);
        let first = n.min(self.capacity - self.next);
        self.ring.narrow(0, self.next as i64, first as i64).copy_(&src.narrow(0, 0, first as i64));
        if first < n {
            self.ring.narrow(0, 0, (n - first) as i64).copy_(&src.narrow(0, first as i64, (n - first) as i64));
        }
        if let Some(p) = &mut self.prio {
            p.added(self.next, &self.staging_td[..first]);
            p.added(0, &self.staging_td[first..]);
        }
        self.next = (self.next + n) % self.capacity;
        self.len = (self.len + n).min(self.capacity);
        // Queued after the block's copy on the same stream: a draw after it sees both.
        let _ = self.fill.fill_(self.len as i64);
        self.staging.clear();
        self.staging_td.clear();
    }

    /// Draw `out.size()[0]` rows with replacement into `out` (`[B, 64]`, on the
    /// device): uniformly, row `rand % fill` for each of `rand`'s numbers (`[B]` int64 in
    /// `0..DRAW_RANGE`, a [`Tensor::randint_low`] draw); or by priority (from numbers of
    /// its own), returning the rows' indices and importance weights, the schedule of the
    /// weights' exponent advanced by `moved` (0-dimensional f32: 1 when the step this
    /// draw is for trains the run). Device work only, every value read on the device:
    /// capturable once as a CUDA graph, whatever is written to the ring after.
    pub fn draw_into(&mut self, out: &Tensor, rand: &Tensor, moved: &Tensor) -> Option<Drawn> {
        match &mut self.prio {
            Some(p) => {
                let d = p.draw(out.size()[0] as usize, moved);
                let _ = self.ring.index_select_out(out, 0, &d.indices);
                Some(d)
            }
            None => {
                let _ = self.ring.index_select_out(out, 0, &rand.remainder_tensor(&self.fill));
                None
            }
        }
    }

    /// Rows waiting in host memory for the next block.
    pub fn staged(&self) -> usize {
        self.staging.len() / R
    }
}

/// The paper's in-RAM baseline.
pub struct HostReplay {
    /// `capacity x 64` device rows ([`row`]), in RAM.
    ring: Vec<f32>,
    capacity: usize,
    next: usize,
    len: usize,
    rng: rand::rngs::SmallRng,
    /// Reused gather buffer for one batch.
    gather: Vec<f32>,
    /// Reused conversion buffer for one push.
    converted: Vec<f32>,
    gamma_n: f32,
    device: Device,
    /// With prioritized sampling: the rows' priorities, in RAM beside the ring.
    prio: Option<Priorities>,
}

impl HostReplay {
    /// A ring in RAM for a run whose bootstrap is discounted `gamma_n`; batches go to
    /// `device`.
    pub fn new(capacity: usize, gamma_n: f64, device: Device) -> Result<Self, ReplayError> {
        ReplayConfig { kind: ReplayKind::Host, capacity, update_size: 1, ..Default::default() }.validate()?;
        check_host_memory(capacity)?;
        use rand::SeedableRng;
        // `vec![0.0; n]` is a zeroed allocation: pages are only touched when written.
        Ok(HostReplay {
            ring: vec![0.0; capacity * R],
            capacity,
            next: 0,
            len: 0,
            rng: rand::rngs::SmallRng::from_os_rng(),
            gather: Vec::new(),
            converted: Vec::new(),
            gamma_n: gamma_n as f32,
            device,
            prio: None,
        })
    }

    /// Append `rows` (whole wire transitions) with their |TD errors| `td` (one per row,
    /// NaN for "at the running maximum"), overwriting the oldest when full.
    pub fn push(&mut self, rows: &[f32], td: &[f32]) -> Result<(), ReplayError> {
        check_scored(rows, td)?;
        // Only the newest `capacity` rows can survive the push.
        let n = td.len();
        let skip = n.saturating_sub(self.capacity);
        self.converted.clear();
        row::from_wire(&rows[skip * W..], self.gamma_n, &mut self.converted);
        let mut rest = (&self.converted[..], &td[skip..]);
        self.next = (self.next + skip) % self.capacity;
        while !rest.1.is_empty() {
            let take = (self.capacity - self.next).min(rest.1.len());
            self.ring[self.next * R..(self.next + take) * R].copy_from_slice(&rest.0[..take * R]);
            if let Some(p) = &mut self.prio {
                p.added(self.next, &rest.1[..take]);
            }
            rest = (&rest.0[take * R..], &rest.1[take..]);
            self.next = (self.next + take) % self.capacity;
        }
        self.len = (self.len + n).min(self.capacity);
        Ok(())
    }

    /// Indices drawn on the CPU, rows gathered in RAM, the batch copied to the device
    /// (into `out`).
    ///
    /// The gather buffer is ordinary (pageable) memory. A pinned buffer would allow an
    /// asynchronous transfer, but tch offers no safe way to write host floats into an
    /// existing pinned tensor without an extra copy, which at 7-58 KB per batch costs
    /// about what pinning saves; and this is the paper's baseline (a feed_dict copy).
    ///
    /// By priority, the indices are drawn in RAM by the same code as the device
    /// replay's, read into a `Vec` and gathered the same way; the weights go to the
    /// device with the batch. An empty ring draws its row 0 (zeros), as the device's.
    pub fn draw_into(&mut self, out: &Tensor, moved: &Tensor) -> Option<Drawn> {
        use rand::Rng;
        let batch = out.size()[0] as usize;
        self.gather.clear();
        let drawn = match &mut self.prio {
            Some(p) => {
                let d = p.draw(batch, moved);
                for i in Vec::<i64>::try_from(&d.indices).expect("int64 indices") {
                    self.gather.extend_from_slice(&self.ring[i as usize * R..(i as usize + 1) * R]);
                }
                Some(Drawn { indices: d.indices, weights: d.weights.to_device(self.device) })
            }
            None => {
                for _ in 0..batch {
                    let i = self.rng.random_range(0..self.len.max(1));
                    self.gather.extend_from_slice(&self.ring[i * R..(i + 1) * R]);
                }
                None
            }
        };
        out.shallow_clone().copy_(&Tensor::from_slice(&self.gather).view([batch as i64, R as i64]));
        drawn
    }
}

/// The replay the trainer owns: the device ring or the in-RAM baseline.
pub enum Replay {
    Device(DeviceReplay),
    Host(HostReplay),
}

impl Replay {
    /// Build the replay `cfg` describes for `device` (for the host kind, `device` is
    /// where sampled batches go), for a run whose bootstrap is discounted `gamma_n`
    /// (`gamma^n_step`: each row's discount column, [`row`]).
    pub fn new(cfg: &ReplayConfig, gamma_n: f64, device: Device) -> Result<Replay, ReplayError> {
        cfg.validate()?;
        Ok(match cfg.kind {
            ReplayKind::Device => Replay::Device(DeviceReplay { prio: cfg.priorities(device), ..DeviceReplay::new(cfg.capacity, cfg.update_size, gamma_n, device)? }),
            ReplayKind::Host => Replay::Host(HostReplay { prio: cfg.priorities(Device::Cpu), ..HostReplay::new(cfg.capacity, gamma_n, device)? }),
        })
    }

    pub fn kind(&self) -> ReplayKind {
        match self {
            Replay::Device(_) => ReplayKind::Device,
            Replay::Host(_) => ReplayKind::Host,
        }
    }

    /// Add whole wire transitions (`k x 57` floats); with prioritized sampling they
    /// enter at the running maximum.
    pub fn push(&mut self, rows: &[f32]) -> Result<(), ReplayError> {
        self.push_scored(rows, None)
    }

    /// [`Replay::push`] with each row's |TD error| (`k` values, `[replay] new_priority =
    /// "td"`), from which prioritized sampling computes its priority; `None`, or a NaN,
    /// enters at the running maximum.
    pub fn push_scored(&mut self, rows: &[f32], td_abs: Option<&[f32]>) -> Result<(), ReplayError> {
        let unscored;
        let td = match td_abs {
            Some(td) => td,
            None => {
                unscored = vec![f32::NAN; rows.len() / W];
                &unscored
            }
        };
        match self {
            Replay::Device(r) => r.push(rows, td),
            Replay::Host(r) => r.push(rows, td),
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

    /// Draw `out.size()[0]` rows (`out`: `[B, 64]` on the training device) as `[replay]
    /// sampling` says; by priority, with the indices and importance weights returned
    /// and the weights' schedule advanced by `moved` (0-dimensional f32, 1 when the
    /// step trains this run). `rand`: `[B]` int64 in `0..DRAW_RANGE`, the uniform
    /// draw's numbers on the device ring. See [`DeviceReplay::draw_into`].
    pub fn draw_into(&mut self, out: &Tensor, rand: &Tensor, moved: &Tensor) -> Option<Drawn> {
        match self {
            Replay::Device(r) => r.draw_into(out, rand, moved),
            // The in-RAM priorities and their schedule live on the CPU, as in
            // `update_priorities`.
            Replay::Host(r) => r.draw_into(out, &moved.to_device(Device::Cpu)),
        }
    }

    /// `[batch, 64]` on the training device, drawn with replacement as `[replay]
    /// sampling` says (tests; each call advances the priorities' weight
    /// schedule by one). At least one row must be visible.
    pub fn sample(&mut self, batch: usize) -> Result<Sampled, ReplayError> {
        if self.is_empty() {
            return Err(ReplayError::Empty);
        }
        let device = match self {
            Replay::Device(r) => r.device,
            Replay::Host(r) => r.device,
        };
        let rows = Tensor::empty([batch as i64, R as i64], (Kind::Float, device));
        let rand = Tensor::randint_low(0, DRAW_RANGE, [batch as i64], (Kind::Int64, device));
        let drawn = self.draw_into(&rows, &rand, &Tensor::ones([], (Kind::Float, device)));
        Ok(Sampled { rows, drawn })
    }

    /// The learner's absolute TD errors for a batch drawn by priority (`drawn` is what
    /// [`Replay::draw_into`] returned): the new priorities of its rows, where `moved` (a
    /// 0-dimensional f32) is 1; a run held back keeps its priorities (its TD errors are
    /// of a step not taken). Without priorities, nothing. Device work alone on the
    /// device ring.
    pub fn update_priorities(&mut self, drawn: &Drawn, td_abs: &Tensor, moved: &Tensor) {
        match self {
            Replay::Device(r) => {
                if let Some(p) = &mut r.prio {
                    p.update(&drawn.indices, td_abs, moved);
                }
            }
            Replay::Host(r) => {
                if let Some(p) = &mut r.prio {
                    p.update(&drawn.indices, &td_abs.to_device(Device::Cpu), &moved.to_device(Device::Cpu));
                }
            }
        }
    }

    /// Prioritized sampling on the device replay: as loops over host memory (`on`, the
    /// default on the CPU) or as the tensor ops a GPU runs ([`Priorities::set_host_loops`]).
    pub fn set_host_loops(&mut self, on: bool) {
        if let Replay::Device(DeviceReplay { prio: Some(p), .. }) = self {
            p.set_host_loops(on);
        }
    }

    /// Start the priorities' weight schedule at train step `step` (a restore).
    pub fn set_steps(&mut self, step: u64) {
        let prio = match self {
            Replay::Device(r) => r.prio.as_mut(),
            Replay::Host(r) => r.prio.as_mut(),
        };
        if let Some(p) = prio {
            p.set_steps(step);
        }
    }

    /// With prioritized sampling, every row's priority `p_i` (tests, diagnostics): a copy.
    pub fn priorities(&self) -> Option<Vec<f32>> {
        match self {
            Replay::Device(r) => r.prio.as_ref(),
            Replay::Host(r) => r.prio.as_ref(),
        }
        .map(Priorities::values)
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
    use shine_agent::experience::col;
    use shine_agent::state::STATE_DIM;
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
        flat.chunks_exact(R).take(r.len()).map(|row| row_id(row).expect("a whole inserted row")).collect()
    }

    /// The id of a stored row: its state, action, reward and next state all say the
    /// same `i`, in their places of the device row, beside the bias inputs' 1.0.
    fn row_id(row: &[f32]) -> Option<usize> {
        let id = row[0];
        let wire = |c: usize| id + c as f32 / 100.0;
        let whole = id.fract() == 0.0
            && (0..STATE_DIM).all(|c| row[row::STATE + c] == wire(col::STATE + c) && row[row::NEXT_STATE + c] == wire(col::NEXT_STATE + c))
            && row[row::ACTION] == wire(col::ACTION)
            && row[row::REWARD] == wire(col::REWARD)
            && row[row::ONE] == 1.0
            && row[row::NEXT_ONE] == 1.0;
        whole.then_some(id as usize)
    }

    /// 1 as a draw's `moved`: the step trains.
    fn moves() -> Tensor {
        Tensor::ones([], (Kind::Float, Device::Cpu))
    }

    fn device(capacity: usize, update_size: usize) -> Replay {
        Replay::new(&ReplayConfig { kind: ReplayKind::Device, capacity, update_size, ..Default::default() }, 0.9, Device::Cpu).unwrap()
    }

    fn host(capacity: usize) -> Replay {
        Replay::new(&ReplayConfig { kind: ReplayKind::Host, capacity, update_size: 1, ..Default::default() }, 0.9, Device::Cpu).unwrap()
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
            let b = r.sample(2000).unwrap().rows;
            assert_eq!(b.size(), vec![2000, R as i64]);
            let flat = Vec::<f32>::try_from(&b.view([-1])).unwrap();
            let seen: HashSet<usize> = flat.chunks_exact(R).map(|row| row_id(row).expect("a whole inserted row")).collect();
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
        let err = |kind, capacity, update_size| {
            Replay::new(&ReplayConfig { kind, capacity, update_size, ..Default::default() }, 0.9, Device::Cpu).err().expect("rejected").to_string()
        };
        let e = err(ReplayKind::Device, 1000, 2000);
        assert!(e.contains("cannot hold one block") && e.contains("update_size 2000"), "{e}");
        assert!(err(ReplayKind::Device, 1000, 0).contains("update_size must be at least 1"));
        assert!(err(ReplayKind::Host, 0, 1).contains("capacity must be at least 1"));
        let bad = |c: ReplayConfig| Replay::new(&c, 0.9, Device::Cpu).err().expect("rejected").to_string();
        assert!(bad(ReplayConfig { alpha: 1.5, capacity: 10, update_size: 1, ..Default::default() }).contains("alpha 1.5"));
        assert!(bad(ReplayConfig { beta: -0.1, capacity: 10, update_size: 1, ..Default::default() }).contains("beta -0.1"));
        assert!(bad(ReplayConfig { priority_eps: 0.0, capacity: 10, update_size: 1, ..Default::default() }).contains("priority_eps 0"));
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

    fn prioritized(kind: ReplayKind, capacity: usize, update_size: usize) -> Replay {
        let cfg = ReplayConfig { kind, capacity, update_size, sampling: Sampling::Prioritized, alpha: 1.0, priority_eps: 1e-6, beta: 1.0, beta_steps: 0, ..Default::default() };
        Replay::new(&cfg, 0.9, Device::Cpu).unwrap()
    }

    fn priorities(r: &Replay) -> Vec<f32> {
        r.priorities().expect("prioritized")
    }

    #[test]
    fn scored_rows_take_their_own_priority_across_the_ring_end() {
        for kind in [ReplayKind::Device, ReplayKind::Host] {
            // 2,600 rows through a ring of 2,000 in blocks of 300, each scored with its
            // own id as its TD error, except batches 3, 9 and 12: they start a device block
            // (600, 1800, 2400), so on both kinds they enter at the largest id before them.
            let mut r = prioritized(kind, 2000, 300);
            for k in 0..13 {
                let batch = k * 200..(k + 1) * 200;
                let td: Vec<f32> = batch.clone().map(|id| id as f32).collect();
                r.push_scored(&rows(batch), (k % 3 != 0 || k == 0).then_some(&td[..])).unwrap();
            }
            r.flush();
            let p = priorities(&r);
            for (slot, id) in ring_ids(&r).into_iter().enumerate() {
                let want = if (id / 200) % 3 != 0 { id as f32 } else { (id - id % 200 - 1) as f32 };
                assert!((p[slot] - want).abs() <= 1e-3 * want.max(1.0), "{kind:?}: row {id} at slot {slot}: priority {} vs {want}", p[slot]);
            }
            assert!(matches!(r.push_scored(&rows(0..3), Some(&[1.0, 2.0])), Err(ReplayError::Scores { rows: 3, scores: 2 })), "{kind:?}");
        }
    }

    #[test]
    fn priority_updates_land_on_the_sampled_rows_across_the_ring_end() {
        tch::manual_seed(21);
        for kind in [ReplayKind::Device, ReplayKind::Host] {
            // 2,600 rows through a ring of 2,000 in blocks of 300: the ring has wrapped
            // (a block straddled its end) and rows 600..2600 are in it.
            let mut r = prioritized(kind, 2000, 300);
            for k in 0..13 {
                r.push(&rows(k * 200..(k + 1) * 200)).unwrap();
            }
            r.flush();
            let ids = ring_ids(&r);
            assert_eq!(*ids.iter().min().unwrap(), 600, "{kind:?}");
            assert!(priorities(&r)[..2000].iter().all(|&p| p == 1.0), "{kind:?}: new rows enter at the maximum, 1 at first");
            // Each sampled row's TD error is its own id: its priority must become that.
            for _ in 0..5 {
                let s = r.sample(64).unwrap();
                let drawn = s.drawn.as_ref().expect("prioritized");
                let flat = Vec::<f32>::try_from(&s.rows.view([-1])).unwrap();
                let sampled: Vec<usize> = flat.chunks_exact(R).map(|row| row_id(row).expect("a whole row")).collect();
                let idx = Vec::<i64>::try_from(&drawn.indices).unwrap();
                for (&i, &id) in idx.iter().zip(&sampled) {
                    assert_eq!(ids[i as usize], id, "{kind:?}: index {i} names the row that was returned");
                }
                let td = Tensor::from_slice(&sampled.iter().map(|&id| id as f32).collect::<Vec<_>>());
                r.update_priorities(drawn, &td, &moves());
                let p = priorities(&r);
                for (&i, &id) in idx.iter().zip(&sampled) {
                    assert!((p[i as usize] - id as f32).abs() <= 1e-3 * id as f32, "{kind:?}: row {id} at slot {i} has priority {}", p[i as usize]);
                }
            }
            // The running maximum is now a high id: new rows enter there, and (alpha 1)
            // the next draws favour the updated rows over the rest.
            let max = priorities(&r).iter().cloned().fold(0.0, f32::max);
            r.push(&rows(5000..5300)).unwrap();
            r.flush();
            let p = priorities(&r);
            let at = ring_ids(&r).iter().position(|&id| id == 5000).unwrap();
            assert_eq!(p[at], max, "{kind:?}: a new row enters at the running maximum");
        }
    }

    #[test]
    fn prioritized_draws_favour_high_priorities_and_weigh_them_down() {
        tch::manual_seed(22);
        for kind in [ReplayKind::Device, ReplayKind::Host] {
            let mut r = prioritized(kind, 1000, 100);
            r.push(&rows(0..1000)).unwrap();
            // Rows at slots 0..10 get TD error 100, the rest 1: (10 x 100) vs (990 x 1).
            let idx = Tensor::arange(1000, (Kind::Int64, Device::Cpu));
            let td = Tensor::ones([1000], (Kind::Float, Device::Cpu));
            let _ = td.narrow(0, 0, 10).fill_(100.0);
            r.update_priorities(&Drawn { indices: idx, weights: Tensor::ones([1000], (Kind::Float, Device::Cpu)) }, &td, &moves());
            let s = r.sample(4000).unwrap();
            let d = s.drawn.unwrap();
            let idx = Vec::<i64>::try_from(&d.indices).unwrap();
            let w = Vec::<f32>::try_from(&d.weights).unwrap();
            let hot = idx.iter().filter(|&&i| i < 10).count() as f64 / 4000.0;
            // Expected share 1000 / 1990 = 0.503.
            assert!((hot - 0.503).abs() < 0.03, "{kind:?}: share of the hot rows {hot}");
            for (&i, &w) in idx.iter().zip(&w) {
                let want = if i < 10 { 0.01 } else { 1.0 };
                assert!((w - want).abs() < 1e-4, "{kind:?}: weight of slot {i}: {w}");
            }
        }
    }

    #[test]
    fn config_defaults_are_the_papers_and_unknown_fields_are_rejected() {
        let c: ReplayConfig = serde_json::from_str(r#"{"kind": "host"}"#).unwrap();
        assert_eq!((c.kind, c.capacity, c.update_size), (ReplayKind::Host, 1_000_000, 2_000));
        assert!(serde_json::from_str::<ReplayConfig>(r#"{"capacity": 10, "updatesize": 2}"#).is_err());
    }

    #[test]
    fn draws_stay_below_the_fill_level_as_it_grows_and_are_uniform_over_it() {
        // One `draw_into` with the same tensors each time, as a step captured once as a
        // CUDA graph replays it: the fill level it reads is a tensor written in place
        // after each block, so each draw sees every block written before it, and no row
        // beyond.
        let mut r = device(5000, 500);
        let (out, moved) = (Tensor::empty([4000, R as i64], (Kind::Float, Device::Cpu)), moves());
        let fill_at = |r: &Replay| match r {
            Replay::Device(d) => d.fill.data_ptr() as usize,
            Replay::Host(_) => unreachable!(),
        };
        let place = fill_at(&r);
        // The draw's random numbers from a seeded generator of the test's own (libtorch's
        // one generator is shared with the tests beside it), so the counts below are
        // the same every run.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(51);
        let mut rand = || Tensor::from_slice(&(0..4000).map(|_| rng.random_range(0..DRAW_RANGE)).collect::<Vec<i64>>());
        // An empty ring draws its row 0 and nothing past it (a run in burn-in, held back).
        r.draw_into(&out, &rand(), &moved);
        for blocks in 1..=10usize {
            r.push(&rows((blocks - 1) * 500..blocks * 500)).unwrap();
            let rand = rand();
            assert!(r.draw_into(&out, &rand, &moved).is_none(), "uniform: no weights");
            let flat = Vec::<f32>::try_from(&out.view([-1])).unwrap();
            let ids: Vec<usize> = flat.chunks_exact(R).map(|row| row_id(row).expect("a whole inserted row")).collect();
            let visible = blocks * 500;
            assert!(ids.iter().all(|&i| i < visible), "{blocks} blocks: drew row {:?}", ids.iter().max());
            // Ten equal bins of the visible rows: chi-square, 9 degrees of freedom, P(chi2
            // > 27.88) = 0.001.
            let mut bins = [0.0f64; 10];
            for &i in &ids {
                bins[i * 10 / visible] += 1.0;
            }
            let chi2: f64 = bins.iter().map(|&b| (b - 400.0).powi(2) / 400.0).sum();
            assert!(chi2 < 27.88, "{blocks} blocks: chi-square {chi2:.1}, bins {bins:?}");
        }
        assert_eq!(fill_at(&r), place, "the fill level is one tensor, written in place");
    }
}
