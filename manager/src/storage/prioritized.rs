//! Proportional prioritized sampling (Schaul et al. 2016, "Prioritized Experience
//! Replay"; Ape-X's replay) held on the replay's device beside the ring.
//!
//! Row `i` is drawn with probability `P(i) = p_i / sum_k p_k`, where `p_i = (|delta_i| +
//! eps)^alpha` from the last TD error `delta_i` the learner computed for it. A row
//! never trained on enters at the running maximum of the priorities so far (Schaul's
//! choice: every new row is seen at least once soon). The learner corrects the bias
//! with importance weights `w_i = (N P(i))^-beta / max_k w_k`, which reduce to `(p_i /
//! p_min)^-beta`: the largest possible weight (that of the least likely row in the
//! replay) is 1. `beta` rises from `[replay] beta` to 1 over `beta_steps` train steps.
//!
//! Why two levels and not a sum tree: a tree of a million leaves is 20 dependent
//! levels, and each level on a device is a kernel launch (or, on the CPU, a libtorch
//! op's dispatch) for 32 values. Here the priorities are cut into blocks of [`BLOCK`]
//! rows with a sum (and a minimum) per block; a draw is a `cumsum` and a
//! `searchsorted` over the ~1,000 block sums, then over the chosen blocks' rows (a
//! `[batch, 1024]` gather): a fixed handful of ops, whatever the batch, all on the
//! device. An update rewrites the touched rows, then recomputes only the touched blocks.
//! The cumulative sums run in float64: the mass of a million priorities in float32
//! would round away a rare row's share.
//!
//! Draws are stratified as in the paper: the total mass is cut into `batch` equal
//! segments and one row is drawn from each.
//!
//! Everything a train step does here is device work that reads its values on the
//! device, written in place into tensors that live as long as the replay: the
//! exponent `beta` from a count of the steps taken kept on the device, the running
//! maximum, the update of the drawn rows' priorities. So a step that draws by priority
//! and updates the priorities is captured once as a CUDA graph and replayed for the
//! run's life.
//!
//! On the CPU the same draw, update and refresh run as plain loops over the tensors'
//! memory instead of as tensor ops. Why: there each op is a libtorch dispatch for a
//! few dozen values, and with the three dozen ops of a step's draw and update
//! prioritized sampling added 0.13 ms (AMD EPYC) to 0.21 ms (Intel Xeon), a fifth to a
//! third of the lean train step; as loops it adds 7 to 11 % on the Intel VM
//! (`docs/benchmarks.md`). The random numbers still come from libtorch, and a test
//! checks that both ways draw the same rows from them and leave the same priorities.
//! The loops see the tensors' memory through `shine_agent::hostmem` (`host`,
//! `host_mut` here), whose `# Safety` they keep: the tensors are this struct's own,
//! never handed out or shallow-cloned.

use shine_agent::hostmem::{f32_slice as host, f32_slice_mut as host_mut};
use tch::{Device, Kind, Tensor};

/// Rows per block: the second-level `searchsorted` scans `batch x BLOCK` values, the
/// first ~capacity / BLOCK; 1,024 keeps both small at a million rows.
pub const BLOCK: usize = 1024;

/// Just below 1: draws are kept strictly under a cumulative sum's end, so rounding can
/// never select past the last row with mass (an empty row).
const UNDER_ONE: f64 = 1.0 - 1.0 / (1u64 << 20) as f64;

/// A batch drawn by priority: which rows, and the importance weight of each.
pub struct Drawn {
    /// Ring rows, `[batch]` int64 on the device.
    pub indices: Tensor,
    /// `(p_i / p_min)^-beta`, `[batch]` f32 on the device, each in (0, 1].
    pub weights: Tensor,
}

/// The priorities of one ring of `capacity` rows.
pub struct Priorities {
    /// `p_i` per row (already raised to `alpha`), padded to whole blocks; 0 marks a row
    /// never written, which can never be drawn.
    p: Tensor,
    /// Per block: the sum of its `p`.
    sums: Tensor,
    /// Per block: the least `p` of its written rows (+inf for an empty block).
    mins: Tensor,
    /// The running maximum of `p`, a 0-dimensional tensor on the device, written in place.
    max: Tensor,
    /// Train steps taken, 0-dimensional f64 on the device (advanced by each draw for a
    /// step that trains): `beta`'s schedule reads it there.
    steps: Tensor,
    /// `-beta` at step 0 and its change per step: `-beta = max(-1, neg_beta0 + steps *
    /// neg_beta_slope)`.
    neg_beta0: Tensor,
    neg_beta_slope: Tensor,
    alpha: f64,
    eps: f64,
    blocks: i64,
    device: Device,
    /// Loops over host memory instead of tensor ops (on the CPU: the module's doc).
    host: bool,
}

impl Priorities {
    /// Priorities for an empty ring of `capacity` rows. `alpha` >= 0 (0: uniform),
    /// `eps` > 0 (keeps every written row drawable); the importance weights' exponent
    /// rises from `beta` to 1 over `beta_steps` train steps (0: it stays `beta`).
    pub fn new(capacity: usize, alpha: f64, eps: f64, beta: f64, beta_steps: u64, device: Device) -> Priorities {
        let blocks = capacity.div_ceil(BLOCK) as i64;
        let opts = (Kind::Float, device);
        let slope = if beta_steps == 0 { 0.0 } else { (1.0 - beta) / beta_steps as f64 };
        let scalar = |v: f64| Tensor::from_slice(&[v]).view([]).to_device(device);
        Priorities {
            p: Tensor::zeros([blocks * BLOCK as i64], opts),
            sums: Tensor::zeros([blocks], opts),
            mins: Tensor::full([blocks], f64::INFINITY, opts),
            // Schaul et al.: p_1 = 1.
            max: Tensor::ones([], opts),
            steps: scalar(0.0),
            neg_beta0: scalar(-beta),
            neg_beta_slope: scalar(-slope),
            alpha,
            eps,
            blocks,
            device,
            host: device == Device::Cpu,
        }
    }

    /// Whether the draw, update and refresh run as loops over host memory (`on`, the
    /// default on the CPU) or as the tensor ops a GPU runs (tests and benchmarks count
    /// those on the CPU).
    pub fn set_host_loops(&mut self, on: bool) {
        self.host = on && self.device == Device::Cpu;
    }

    /// Train steps taken so far (a restore): the schedule of `beta` continues from it.
    pub fn set_steps(&mut self, steps: u64) {
        let _ = self.steps.fill_(steps as f64);
    }

    /// Rows `start .. start + td_abs.len()` (not wrapping) were just written. Each
    /// enters at the priority of its |TD error| in `td_abs`, or, where that is NaN, at
    /// the running maximum (`[replay] new_priority`).
    pub fn added(&mut self, start: usize, td_abs: &[f32]) {
        let n = td_abs.len();
        if n == 0 {
            return;
        }
        let (first, last) = (start / BLOCK, (start + n - 1) / BLOCK);
        if self.host {
            let (eps, alpha) = (self.eps as f32, self.alpha as f32);
            let max = &mut host_mut(&mut self.max)[0];
            let p = &mut host_mut(&mut self.p)[start..start + n];
            let at_max = *max;
            for (p, &td) in p.iter_mut().zip(td_abs) {
                *p = if td.is_nan() { at_max } else { (td + eps).powf(alpha) };
                *max = max.max(*p);
            }
            self.refresh_host(first..=last);
            return;
        }
        let td = Tensor::from_slice(td_abs).to_device(self.device);
        let new = (&td + self.eps).pow_tensor_scalar(self.alpha).where_self(&td.isnan().logical_not(), &self.max);
        self.raise_max(&new);
        self.p.narrow(0, start as i64, n as i64).copy_(&new);
        let touched = Tensor::arange_start(first as i64, last as i64 + 1, (Kind::Int64, self.device));
        self.refresh(&touched);
    }

    /// The running maximum raised to `new`'s largest, in place.
    fn raise_max(&mut self, new: &Tensor) {
        let raised = self.max.maximum(&new.max());
        self.max.copy_(&raised);
    }

    /// Draw `batch` rows by priority, one from each of `batch` equal slices of the
    /// total mass, with their importance weights at this step's `beta`; then advance
    /// `beta`'s schedule by `moved` (0-dimensional f32: 1 when the step this draw is for
    /// trains the run, 0 when it holds the run back). Draws only among rows
    /// [`added`](Self::added); with none, row 0 (of weight NaN: the step must hold the
    /// run back).
    pub fn draw(&mut self, batch: usize, moved: &Tensor) -> Drawn {
        let neg_beta = self.neg_beta0.addcmul(&self.steps, &self.neg_beta_slope).clamp_min(-1.0);
        let d = self.draw_at(batch, &neg_beta);
        let _ = self.steps.g_add_(&moved.to_kind(Kind::Double));
        d
    }

    /// [`Priorities::draw`] with the weights' exponent given (`-beta`, 0-dimensional f64
    /// on the device), the schedule left alone.
    fn draw_at(&self, batch: usize, neg_beta: &Tensor) -> Drawn {
        // One uniform number per draw from libtorch's generator, whichever way the draw
        // is computed: `tch::manual_seed` fixes both alike.
        let r = Tensor::rand([batch as i64], (Kind::Double, self.device));
        if self.host {
            self.draw_host(&r, f64::try_from(neg_beta).expect("a scalar"))
        } else {
            self.draw_tensors(&r, neg_beta)
        }
    }

    /// [`Priorities::draw_at`] in tensor ops, on any device: draw `k` falls at `(k +
    /// r[k]) / batch` of the total mass (the cumulative sums in float64).
    fn draw_tensors(&self, r: &Tensor, neg_beta: &Tensor) -> Drawn {
        let b = r.size()[0];
        let opts = (Kind::Double, self.device);
        // First level: which block each draw falls in.
        let cum = self.sums.cumsum(0, Kind::Double);
        let total = cum.select(0, self.blocks - 1);
        let u = (Tensor::arange(b, opts) + r) / b as f64 * &total;
        let u = u.minimum(&(&total * UNDER_ONE));
        let block = u.searchsorted(&cum, false, true, "right", None::<Tensor>).clamp_max(self.blocks - 1);
        // Second level: the row within the block, from what is left of the draw.
        let before = cum.index_select(0, &block) - self.sums.index_select(0, &block);
        let rows = self.p.view([self.blocks, BLOCK as i64]).index_select(0, &block); // [b, BLOCK]
        let within = rows.cumsum(1, Kind::Double);
        let end = within.select(1, BLOCK as i64 - 1);
        let rest = (u - before).clamp_min(0.0).minimum(&(end * UNDER_ONE)).unsqueeze(1);
        let offset = rest.searchsorted(&within, false, true, "right", None::<Tensor>).squeeze_dim(1).clamp_max(BLOCK as i64 - 1);
        let indices = block * BLOCK as i64 + offset;
        let chosen = self.p.index_select(0, &indices);
        let weights = (chosen / self.mins.min()).pow(neg_beta).to_kind(Kind::Float);
        Drawn { indices, weights }
    }

    /// [`Priorities::draw_tensors`] as loops over host memory (CPU tensors). The draws'
    /// positions in the mass rise with `k`, so one walk over the block sums serves the
    /// whole batch; inside a block, whole chunks of rows are skipped by their sums.
    fn draw_host(&self, r: &Tensor, neg_beta: f64) -> Drawn {
        let (p, sums, mins) = (host(&self.p), host(&self.sums), host(&self.mins));
        let r = Vec::<f64>::try_from(r).expect("f64 random numbers");
        let b = r.len();
        // The same arithmetic as the tensor ops (sums in f64, as their `cumsum`): the two
        // ways then agree row for row.
        let total = sums.iter().map(|&s| s as f64).sum::<f64>();
        let p_min = mins.iter().copied().fold(f32::INFINITY, f32::min);
        let (mut indices, mut weights) = (Vec::with_capacity(b), Vec::with_capacity(b));
        // The block of the last draw, and the mass up to its end.
        let (mut block, mut cum) = (0, sums[0] as f64);
        for (k, &rk) in r.iter().enumerate() {
            let u = ((k as f64 + rk) / b as f64 * total).min(total * UNDER_ONE);
            while cum <= u && block + 1 < sums.len() {
                block += 1;
                cum += sums[block] as f64;
            }
            let before = cum - sums[block] as f64;
            let rest = (u - before).max(0.0).min(sums[block] as f64 * UNDER_ONE);
            let i = block * BLOCK + first_past(&p[block * BLOCK..(block + 1) * BLOCK], rest);
            indices.push(i as i64);
            weights.push(((p[i] / p_min) as f64).powf(neg_beta) as f32);
        }
        Drawn { indices: Tensor::from_slice(&indices), weights: Tensor::from_slice(&weights) }
    }

    /// The learner's absolute TD errors `td_abs` (`[batch]`) for the rows `indices` it
    /// trained on: their new priorities, where `moved` (0-dimensional f32) is 1; a run
    /// held back keeps its priorities. A row drawn twice keeps one of its two.
    pub fn update(&mut self, indices: &Tensor, td_abs: &Tensor, moved: &Tensor) {
        if self.host {
            if f64::try_from(moved).expect("a scalar") < 0.5 {
                return;
            }
            let indices = Vec::<i64>::try_from(indices).expect("int64 row indices on the CPU");
            let td_abs = Vec::<f32>::try_from(td_abs).expect("one TD error per row");
            let (eps, alpha) = (self.eps as f32, self.alpha as f32);
            let p = host_mut(&mut self.p);
            let max = &mut host_mut(&mut self.max)[0];
            let mut touched = Vec::with_capacity(indices.len());
            for (&i, &td) in indices.iter().zip(&td_abs) {
                let new = (td + eps).powf(alpha);
                p[i as usize] = new;
                *max = max.max(new);
                touched.push(i as usize / BLOCK);
            }
            touched.sort_unstable();
            touched.dedup();
            self.refresh_host(touched);
            return;
        }
        // A held-back run's "new" priorities are its old ones: not even a NaN of its
        // unused batch reaches them (a `where`, not a product).
        let old = self.p.index_select(0, indices);
        let new = (td_abs.to_kind(Kind::Float) + self.eps).pow_tensor_scalar(self.alpha).where_self(&moved.gt(0.5), &old);
        let _ = self.p.index_put_(&[Some(indices.shallow_clone())], &new, false);
        self.raise_max(&new);
        let touched = indices.divide_scalar_mode(BLOCK as i64, "floor");
        self.refresh(&touched);
    }

    /// Recompute the sums and minima of the blocks `touched` (repeats allowed).
    fn refresh(&mut self, touched: &Tensor) {
        let rows = self.p.view([self.blocks, BLOCK as i64]).index_select(0, touched);
        let _ = self.sums.index_put_(&[Some(touched.shallow_clone())], &rows.sum_dim_intlist(1, false, Kind::Float), false);
        let written = rows.where_scalarother(&rows.gt(0.0), f64::INFINITY);
        let _ = self.mins.index_put_(&[Some(touched.shallow_clone())], &written.amin(1, false), false);
    }

    /// [`Priorities::refresh`] over host memory, for the blocks `touched`.
    fn refresh_host(&mut self, touched: impl IntoIterator<Item = usize>) {
        let (p, sums, mins) = (host(&self.p), host_mut(&mut self.sums), host_mut(&mut self.mins));
        for b in touched {
            let (sum, min) = sum_and_min(&p[b * BLOCK..(b + 1) * BLOCK]);
            (sums[b], mins[b]) = (sum as f32, min);
        }
    }

    /// The priority `p_i` of every row (tests, diagnostics), `capacity` rounded up to
    /// whole blocks: a copy.
    pub fn values(&self) -> Vec<f32> {
        Vec::<f32>::try_from(&self.p).expect("f32 priorities")
    }
}

/// Rows summed at once when [`first_past`] skips ahead: 32 fit eight-wide lanes.
const CHUNK: usize = 32;

/// The first row of `row` at which the running sum of the priorities exceeds `rest`;
/// past the end (rounding), the last row with any mass.
fn first_past(row: &[f32], rest: f64) -> usize {
    let mut acc = 0.0;
    let mut o = 0;
    // Whole chunks that end at or below `rest` hold no draw.
    while o + CHUNK <= row.len() {
        let (s, _) = sum_and_min(&row[o..o + CHUNK]);
        if acc + s > rest {
            break;
        }
        acc += s;
        o += CHUNK;
    }
    for (j, &x) in row.iter().enumerate().skip(o) {
        acc += x as f64;
        if acc > rest {
            return j;
        }
    }
    row.iter().rposition(|&x| x > 0.0).unwrap_or(row.len() - 1)
}

/// The sum of `row` (eight f32 lanes, added up in f64) and the least of its non-zero
/// priorities (+inf if none: rows never written are never drawn, so they are not the
/// least likely row), in one pass of eight lanes that the compiler vectorises.
fn sum_and_min(row: &[f32]) -> (f64, f32) {
    let (mut sums, mut mins) = ([0f32; 8], [f32::INFINITY; 8]);
    let chunks = row.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..8 {
            sums[l] += c[l];
            // A select, not `f32::min` behind a filter: it vectorises.
            mins[l] = if c[l] > 0.0 && c[l] < mins[l] { c[l] } else { mins[l] };
        }
    }
    let sum = sums.iter().chain(rest).map(|&x| x as f64).sum();
    let min = mins.iter().chain(rest).copied().filter(|&x| x > 0.0).fold(f32::INFINITY, f32::min);
    (sum, min)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The priorities of an empty CPU ring both ways: the host loops, then the tensor
    /// ops (what a GPU runs). Every test below holds for both.
    fn both(capacity: usize, alpha: f64, eps: f64) -> [Priorities; 2] {
        let host = Priorities::new(capacity, alpha, eps, 0.4, 0, Device::Cpu);
        let tensors = Priorities { host: false, ..Priorities::new(capacity, alpha, eps, 0.4, 0, Device::Cpu) };
        [host, tensors]
    }

    /// 1 as a step's `moved`: it trains.
    fn moves() -> Tensor {
        Tensor::ones([], (Kind::Float, Device::Cpu))
    }

    impl Priorities {
        /// A draw with the weights' exponent `beta` given, the schedule left alone.
        fn draw_beta(&self, batch: usize, beta: f64) -> Drawn {
            self.draw_at(batch, &Tensor::from(-beta))
        }
    }

    fn cpu(capacity: usize) -> [Priorities; 2] {
        both(capacity, 1.0, 1e-6)
    }

    /// `n` rows without a TD error: they enter at the running maximum.
    fn unscored(n: usize) -> Vec<f32> {
        vec![f32::NAN; n]
    }

    fn way(pri: &Priorities) -> &'static str {
        if pri.host {
            "host loops"
        } else {
            "tensor ops"
        }
    }

    /// Give the rows of `pri` exactly the priorities `ps` (alpha 1, eps 0 aside).
    fn set(pri: &mut Priorities, ps: &[f32]) {
        pri.added(0, &unscored(ps.len()));
        let idx = Tensor::arange(ps.len() as i64, (Kind::Int64, Device::Cpu));
        pri.update(&idx, &(Tensor::from_slice(ps) - pri.eps), &moves());
    }

    fn counts(pri: &Priorities, draws: usize, batch: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; n];
        for _ in 0..draws / batch {
            let d = pri.draw_beta(batch, 0.4);
            for i in Vec::<i64>::try_from(&d.indices).unwrap() {
                c[i as usize] += 1.0;
            }
        }
        c
    }

    #[test]
    fn draws_follow_the_priorities() {
        // Rows over three blocks (the last partial) with known priorities: a few heavy
        // rows, at both ends of blocks, and light ones everywhere else. A chi-square
        // test of the counts, the light rows pooled as one category.
        let n = 2 * BLOCK + 500;
        for mut pri in cpu(n) {
            tch::manual_seed(11);
            let mut ps = vec![1e-4f32; n];
            let heavy = [(3usize, 1.0f32), (700, 2.0), (1023, 3.0), (1024, 4.0), (2047, 0.5), (2100, 6.0), (n - 1, 3.5)];
            for &(i, p) in &heavy {
                ps[i] = p;
            }
            set(&mut pri, &ps);
            let draws = 200_000;
            let c = counts(&pri, draws, 64, n);
            let total: f64 = ps.iter().map(|&p| p as f64).sum();
            let heavy_mass: f64 = heavy.iter().map(|&(_, p)| p as f64).sum();
            let mut observed: Vec<(f64, f64)> = heavy.iter().map(|&(i, p)| (c[i], p as f64)).collect();
            observed.push((c.iter().sum::<f64>() - heavy.iter().map(|&(i, _)| c[i]).sum::<f64>(), total - heavy_mass));
            let chi2: f64 = observed.iter().map(|&(o, p)| (o - draws as f64 * p / total).powi(2) / (draws as f64 * p / total)).sum();
            // 7 degrees of freedom: P(chi2 > 40.52) = 1e-6. (The draws come from
            // libtorch's one generator, which the tests running beside this one in the
            // process draw from too, so they differ from run to run: at P = 0.001 a
            // correct sampler would fail one run in a thousand.)
            assert!(chi2 < 40.52, "{}: chi-square {chi2:.2}, (observed, priority): {observed:?}", way(&pri));
        }
    }

    #[test]
    fn rows_never_written_are_never_drawn() {
        // 1,500 of 4,096 rows written: the end of the second block and everything after
        // are empty (priority 0), even when all the mass sits at the last written row.
        for mut pri in cpu(4 * BLOCK) {
            tch::manual_seed(12);
            let mut ps = vec![1e-3f32; 1500];
            ps[1499] = 100.0;
            set(&mut pri, &ps);
            for _ in 0..200 {
                let d = pri.draw_beta(128, 0.5);
                let max = i64::try_from(d.indices.max()).unwrap();
                assert!(max < 1500, "{}: drew row {max}", way(&pri));
            }
        }
    }

    #[test]
    fn alpha_zero_is_uniform() {
        let n = 3000;
        for mut pri in both(n, 0.0, 1e-6) {
            tch::manual_seed(13);
            pri.added(0, &unscored(n));
            let idx = Tensor::arange(n as i64, (Kind::Int64, Device::Cpu));
            pri.update(&idx, &Tensor::rand([n as i64], (Kind::Float, Device::Cpu)).g_mul_scalar(100.0), &moves());
            let d = pri.draw_beta(256, 0.4);
            let w = Vec::<f32>::try_from(&d.weights).unwrap();
            assert!(w.iter().all(|&w| (w - 1.0).abs() < 1e-6), "{}: equal priorities give weight 1: {w:?}", way(&pri));
            // Counts over 30 equal bins of 100 rows: chi-square, 29 degrees of freedom,
            // P(chi2 > 80.44) = 1e-6 (as above: the draws differ from run to run).
            let c = counts(&pri, 150_000, 250, n);
            let bins: Vec<f64> = c.chunks(100).map(|b| b.iter().sum()).collect();
            let e = 150_000.0 / 30.0;
            let chi2: f64 = bins.iter().map(|b| (b - e).powi(2) / e).sum();
            assert!(chi2 < 80.44, "{}: chi-square {chi2:.1} (P = 1e-6 at 29 d.o.f.)", way(&pri));
        }
    }

    #[test]
    fn importance_weights_are_normalised_by_the_least_likely_row() {
        // w_i = (N P(i))^-beta / max_k w_k, and the largest weight is that of the least
        // likely row in the replay, drawn in the batch or not: here row 0, at p = 0.01,
        // is in about one batch of 90.
        let ps = [0.01f64, 2.0, 4.0, 8.0];
        let (n, total, beta) = (4.0, ps.iter().sum::<f64>(), 0.6);
        let weight = |p: f64| (n * p / total).powf(-beta) / (n * ps[0] / total).powf(-beta);
        for mut pri in cpu(8) {
            tch::manual_seed(14);
            set(&mut pri, &ps.map(|p| p as f32));
            for _ in 0..20 {
                let d = pri.draw_beta(16, beta);
                let idx = Vec::<i64>::try_from(&d.indices).unwrap();
                let w = Vec::<f32>::try_from(&d.weights).unwrap();
                for (&i, &w) in idx.iter().zip(&w) {
                    let expected = weight(ps[i as usize]);
                    assert!((w as f64 - expected).abs() < 1e-5, "{}: row {i}: weight {w}, expected {expected}", way(&pri));
                }
            }
        }
    }

    #[test]
    fn updates_land_on_the_drawn_rows_and_their_blocks() {
        let n = 3 * BLOCK;
        for mut pri in cpu(n) {
            tch::manual_seed(15);
            let w = way(&pri);
            pri.added(0, &unscored(n));
            let d = pri.draw_beta(32, 0.4);
            let idx = Vec::<i64>::try_from(&d.indices).unwrap();
            let td: Vec<f32> = (0..32).map(|k| 10.0 + k as f32).collect();
            pri.update(&d.indices, &Tensor::from_slice(&td), &moves());
            let p = pri.values();
            let mut expected = vec![1.0f32; n];
            for (&i, &t) in idx.iter().zip(&td) {
                expected[i as usize] = t + 1e-6;
            }
            // Stratified draws from equal priorities hit 32 distinct rows.
            for (i, (&got, &want)) in p.iter().zip(&expected).enumerate() {
                assert!((got - want).abs() < 1e-4, "{w}: row {i}: {got} vs {want}");
            }
            let sums = Vec::<f32>::try_from(&pri.sums).unwrap();
            for (b, s) in sums.iter().enumerate() {
                let want: f32 = expected[b * BLOCK..(b + 1) * BLOCK].iter().sum();
                assert!((s - want).abs() < 1e-2, "{w}: block {b}: sum {s} vs {want}");
            }
            assert!((f32::try_from(&pri.max).unwrap() - (41.0 + 1e-6)).abs() < 1e-4, "{w}: the running maximum follows updates");
            // New rows enter at the running maximum.
            pri.added(5, &unscored(1));
            assert!((pri.values()[5] - 41.0).abs() < 1e-4, "{w}");
        }
    }

    #[test]
    fn scored_rows_enter_at_their_td_errors_priority_and_unscored_at_the_maximum() {
        for mut pri in both(3 * BLOCK, 0.5, 0.01) {
            let w = way(&pri);
            // Rows 1020..1030 straddle blocks 0 and 1; two of them come without a score.
            let mut td: Vec<f32> = (0..10).map(|i| i as f32).collect();
            td[3] = f32::NAN;
            td[7] = f32::NAN;
            pri.added(1020, &td);
            let p = pri.values();
            let max = (9.0f32 + 0.01).sqrt();
            for (i, &t) in td.iter().enumerate() {
                // Unscored rows take the maximum as it stood before the call: the p_1 = 1.
                let want = if t.is_nan() { 1.0 } else { (t + 0.01).sqrt() };
                assert!((p[1020 + i] - want).abs() < 1e-5, "{w}: row {}: {} vs {want}", 1020 + i, p[1020 + i]);
            }
            assert!((f32::try_from(&pri.max).unwrap() - max).abs() < 1e-5, "{w}: scored rows raise the running maximum");
            let sums = Vec::<f32>::try_from(&pri.sums).unwrap();
            assert!((sums[0] - p[1020..1024].iter().sum::<f32>()).abs() < 1e-4, "{w}: block 0's sum");
            assert!((sums[1] - p[1024..1030].iter().sum::<f32>()).abs() < 1e-4, "{w}: block 1's sum");
            // The next unscored row enters at the new maximum.
            pri.added(2000, &unscored(1));
            assert!((pri.values()[2000] - max).abs() < 1e-5, "{w}");
            // Draws follow the scored priorities: row 1020 (|TD| 0) is the rarest.
            let c = counts(&pri, 128_000, 64, 3 * BLOCK);
            let total: f32 = pri.values().iter().sum();
            for i in [1020, 1029, 2000] {
                let expected = pri.values()[i] as f64 / total as f64 * 128_000.0;
                assert!((c[i] - expected).abs() < 5.0 * expected.sqrt() + 5.0, "{w}: row {i}: {} draws, {expected:.0} expected", c[i]);
            }
        }
    }

    #[test]
    fn the_minimum_skips_rows_never_written() {
        for mut pri in cpu(2 * BLOCK) {
            set(&mut pri, &[0.5, 2.0]);
            // Row 0 is the least likely written row: its weight is 1, row 1's is (2/0.5)^-1.
            let d = pri.draw_beta(64, 1.0);
            let idx = Vec::<i64>::try_from(&d.indices).unwrap();
            let w = Vec::<f32>::try_from(&d.weights).unwrap();
            for (&i, &w) in idx.iter().zip(&w) {
                let want = if i == 0 { 1.0 } else { 0.25 };
                assert!((w - want).abs() < 1e-4, "{}: row {i}: {w}", way(&pri));
            }
        }
    }

    #[test]
    fn host_loops_draw_and_update_as_the_tensor_ops_do() {
        // Whole-number priorities (alpha 1, eps 0.5, TD errors k - 0.5) make every sum
        // exact whatever its order, so from the same random numbers the two ways must
        // pick the same rows, not merely rows as likely. Five blocks, the last partial,
        // rows never written in the middle (a whole empty block among them) and at the
        // end; then updates across blocks, and new rows, round after round.
        let n = 4 * BLOCK + 300;
        let [mut host, mut tensors] = both(n, 1.0, 0.5);
        let values = Tensor::randint_low(1, 9, [n as i64], (Kind::Float, Device::Cpu));
        let mut written = vec![false; n];
        written[..1500].fill(true);
        written[2200..n - 100].fill(true);
        for pri in [&mut host, &mut tensors] {
            pri.added(0, &unscored(1500));
            pri.added(2200, &unscored(n - 2200 - 100));
            let rows =
                Tensor::cat(&[Tensor::arange(1500, (Kind::Int64, Device::Cpu)), Tensor::arange_start(2200, (n - 100) as i64, (Kind::Int64, Device::Cpu))], 0);
            pri.update(&rows, &(values.index_select(0, &rows) - 0.5), &moves());
        }
        for round in 0..30 {
            // The same numbers given to both (the generator is shared with the tests
            // running beside this one, so reseeding it would not do).
            let r = Tensor::rand([64], (Kind::Double, Device::Cpu));
            let (a, b) = (host.draw_host(&r, -0.5), tensors.draw_tensors(&r, &Tensor::from(-0.5f64)));
            let (ia, ib) = (Vec::<i64>::try_from(&a.indices).unwrap(), Vec::<i64>::try_from(&b.indices).unwrap());
            assert_eq!(ia, ib, "round {round}: the same random numbers draw the same rows");
            assert!(ia.iter().all(|&i| written[i as usize]), "round {round}: a row never written was drawn: {ia:?}");
            let (wa, wb) = (Vec::<f32>::try_from(&a.weights).unwrap(), Vec::<f32>::try_from(&b.weights).unwrap());
            for (k, (x, y)) in wa.iter().zip(&wb).enumerate() {
                assert!((x - y).abs() <= 1e-5 * y, "round {round}, draw {k}: weight {x} against {y}");
            }
            // New priorities: whole numbers, some rows twice (the last write stays).
            let td = Tensor::randint_low(1, 20, [64], (Kind::Float, Device::Cpu)) - 0.5;
            host.update(&a.indices, &td, &moves());
            tensors.update(&b.indices, &td, &moves());
            if round % 10 == 9 {
                let start = n - 100 + round as usize / 10 * 10;
                for pri in [&mut host, &mut tensors] {
                    pri.added(start, &unscored(10));
                }
                written[start..start + 10].fill(true);
            }
            assert_eq!(host.values(), tensors.values(), "round {round}: priorities");
            for (name, x, y) in [("sums", &host.sums, &tensors.sums), ("minima", &host.mins, &tensors.mins), ("maximum", &host.max, &tensors.max)] {
                assert_eq!(Vec::<f32>::try_from(&x.view([-1])).unwrap(), Vec::<f32>::try_from(&y.view([-1])).unwrap(), "round {round}: {name}");
            }
        }
    }

    #[test]
    fn beta_rises_with_the_steps_that_train_and_a_held_back_update_changes_nothing() {
        // Rows at 0.5 and 2: a draw of the heavier row weighs (2 / 0.5)^-beta = 4^-beta.
        // beta starts at 0.4 and reaches 1 after 10 steps that train; a draw for a step
        // that holds the run back advances nothing.
        for host in [true, false] {
            let mut pri = Priorities { host, ..Priorities::new(2 * BLOCK, 1.0, 1e-6, 0.4, 10, Device::Cpu) };
            set(&mut pri, &[0.5, 2.0]);
            let beta_seen = |d: &Drawn| {
                let (idx, w) = (Vec::<i64>::try_from(&d.indices).unwrap(), Vec::<f32>::try_from(&d.weights).unwrap());
                let k = idx.iter().position(|&i| i == 1).expect("the heavier row is drawn");
                -(w[k] as f64).ln() / 4f64.ln()
            };
            let (still, one) = (Tensor::zeros([], (Kind::Float, Device::Cpu)), moves());
            let mut want = Vec::new();
            for step in 0..14 {
                // Every third draw is for a step that holds the run back.
                let trains = step % 3 != 2;
                let d = pri.draw(16, if trains { &one } else { &still });
                want.push(beta_seen(&d));
                // Its update, held back or not: a held-back one with NaN errors.
                let td = if trains { Tensor::full([16], 1.5, (Kind::Float, Device::Cpu)) } else { Tensor::full([16], f64::NAN, (Kind::Float, Device::Cpu)) };
                let before = pri.values();
                pri.update(&d.indices, &td, if trains { &one } else { &still });
                if !trains {
                    assert_eq!(pri.values(), before, "host {host}: a held-back step's update changed priorities");
                }
                // Put the two rows back at 0.5 and 2 for the next draw.
                set(&mut pri, &[0.5, 2.0]);
            }
            let trained_before = |step: usize| (0..step).filter(|s| s % 3 != 2).count() as f64;
            for (step, &b) in want.iter().enumerate() {
                let expect = (0.4 + 0.06 * trained_before(step)).min(1.0);
                assert!((b - expect).abs() < 1e-4, "host {host}: step {step}: beta {b}, expected {expect}");
            }
        }
    }
}
