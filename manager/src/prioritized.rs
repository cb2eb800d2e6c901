//! Proportional prioritized sampling (Schaul et al. 2016, "Prioritized Experience
//! Replay"; Ape-X's replay) held on the replay's device beside the ring.
//!
//! Row `i` is drawn with probability `P(i) = p_i / sum_k p_k`, where `p_i = (|delta_i| +
//! eps)^alpha` from the last TD error `delta_i` the learner computed for it. A row
//! never trained on enters at the running maximum of the priorities so far (Schaul's
//! choice: every new row is seen at least once soon). The learner corrects the bias
//! with importance weights `w_i = (N P(i))^-beta / max_k w_k`, which reduce to `(p_i /
//! p_min)^-beta`: the largest possible weight (that of the least likely row in the
//! replay) is 1.
//!
//! Why two levels and not a sum tree: a tree of a million leaves is 20 dependent
//! levels, and each level on a device is a kernel launch (or, on the CPU, a libtorch
//! op's dispatch) for 32 values. Here the priorities are cut into blocks of [`BLOCK`]
//! rows with a sum (and a minimum) per block; a draw is a `cumsum` and a
//! `searchsorted` over the ~1,000 block sums, then over the chosen blocks' rows (a
//! `[batch, 1024]` gather): a fixed handful of ops, whatever the batch, all on the
//! device. An update rewrites the touched rows, then recomputes only the touched blocks.
//!
//! Draws are stratified as in the paper: the total mass is cut into `batch` equal
//! segments and one row is drawn from each.

use tch::{Device, Kind, Tensor};

/// Rows per block: the second-level `searchsorted` scans `batch x BLOCK` values, the
/// first ~capacity / BLOCK; 1,024 keeps both small at a million rows.
pub const BLOCK: usize = 1024;

/// Just below 1 in f32: draws are kept strictly under a cumulative sum's end, so
/// rounding can never select past the last row with mass (an empty row).
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
    /// The running maximum of `p`, a 0-dimensional tensor on the device (no host read).
    max: Tensor,
    alpha: f64,
    eps: f64,
    blocks: i64,
    device: Device,
}

impl Priorities {
    /// Priorities for an empty ring of `capacity` rows. `alpha` >= 0 (0: uniform),
    /// `eps` > 0 (keeps every written row drawable).
    pub fn new(capacity: usize, alpha: f64, eps: f64, device: Device) -> Priorities {
        let blocks = capacity.div_ceil(BLOCK) as i64;
        let opts = (Kind::Float, device);
        Priorities {
            p: Tensor::zeros([blocks * BLOCK as i64], opts),
            sums: Tensor::zeros([blocks], opts),
            mins: Tensor::full([blocks], f64::INFINITY, opts),
            // Schaul et al.: p_1 = 1.
            max: Tensor::ones([], opts),
            alpha,
            eps,
            blocks,
            device,
        }
    }

    /// Rows `start .. start + n` (not wrapping) were just written: they enter at the
    /// running maximum.
    pub fn added(&mut self, start: usize, n: usize) {
        if n == 0 {
            return;
        }
        let _ = self.p.narrow(0, start as i64, n as i64).fill_tensor_(&self.max);
        let first = (start / BLOCK) as i64;
        let last = ((start + n - 1) / BLOCK) as i64;
        let touched = Tensor::arange_start(first, last + 1, (Kind::Int64, self.device));
        self.refresh(&touched);
    }

    /// Draw `batch` rows by priority, one from each of `batch` equal slices of the
    /// total mass, with their importance weights at `beta`. At least one row must
    /// have been [`added`](Self::added).
    pub fn draw(&self, batch: usize, beta: f64) -> Drawn {
        let b = batch as i64;
        let opts = (Kind::Float, self.device);
        // First level: which block each draw falls in.
        let cum = self.sums.cumsum(0, Kind::Float);
        let total = cum.select(0, self.blocks - 1);
        let u = (Tensor::arange(b, opts) + Tensor::rand([b], opts)) / b as f64 * &total;
        let u = u.minimum(&(&total * UNDER_ONE));
        let block = u.searchsorted(&cum, false, true, "right", None::<Tensor>).clamp_max(self.blocks - 1);
        // Second level: the row within the block, from what is left of the draw.
        let before = cum.index_select(0, &block) - self.sums.index_select(0, &block);
        let rows = self.p.view([self.blocks, BLOCK as i64]).index_select(0, &block); // [b, BLOCK]
        let within = rows.cumsum(1, Kind::Float);
        let end = within.select(1, BLOCK as i64 - 1);
        let rest = (u - before).clamp_min(0.0).minimum(&(end * UNDER_ONE)).unsqueeze(1);
        let offset = rest.searchsorted(&within, false, true, "right", None::<Tensor>).squeeze_dim(1).clamp_max(BLOCK as i64 - 1);
        let indices = block * BLOCK as i64 + offset;
        let chosen = self.p.index_select(0, &indices);
        let weights = (chosen / self.mins.min()).pow_tensor_scalar(-beta);
        Drawn { indices, weights }
    }

    /// The learner's absolute TD errors `td_abs` (`[batch]`) for the rows `indices`
    /// it trained on: their new priorities. A row drawn twice keeps one of its two.
    pub fn update(&mut self, indices: &Tensor, td_abs: &Tensor) {
        let new = (td_abs.to_kind(Kind::Float) + self.eps).pow_tensor_scalar(self.alpha);
        let _ = self.p.index_put_(&[Some(indices.shallow_clone())], &new, false);
        self.max = self.max.maximum(&new.max());
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

    /// The priority `p_i` of every row (tests, diagnostics): `[capacity rounded up to
    /// whole blocks]`.
    pub fn values(&self) -> &Tensor {
        &self.p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(capacity: usize) -> Priorities {
        Priorities::new(capacity, 1.0, 1e-6, Device::Cpu)
    }

    /// Give the rows of `pri` exactly the priorities `ps` (alpha 1, eps 0 aside).
    fn set(pri: &mut Priorities, ps: &[f32]) {
        pri.added(0, ps.len());
        let idx = Tensor::arange(ps.len() as i64, (Kind::Int64, Device::Cpu));
        pri.update(&idx, &(Tensor::from_slice(ps) - pri.eps));
    }

    fn counts(pri: &Priorities, draws: usize, batch: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; n];
        for _ in 0..draws / batch {
            let d = pri.draw(batch, 0.4);
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
        tch::manual_seed(11);
        let n = 2 * BLOCK + 500;
        let mut pri = cpu(n);
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
        // 7 degrees of freedom: P(chi2 > 24.32) = 0.001.
        assert!(chi2 < 24.32, "chi-square {chi2:.2}, (observed, priority): {observed:?}");
    }

    #[test]
    fn rows_never_written_are_never_drawn() {
        // 1,500 of 4,096 rows written: the end of the second block and everything after
        // are empty (priority 0), even when all the mass sits at the last written row.
        tch::manual_seed(12);
        let mut pri = cpu(4 * BLOCK);
        let mut ps = vec![1e-3f32; 1500];
        ps[1499] = 100.0;
        set(&mut pri, &ps);
        for _ in 0..200 {
            let d = pri.draw(128, 0.5);
            let max = i64::try_from(d.indices.max()).unwrap();
            assert!(max < 1500, "drew row {max}");
        }
    }

    #[test]
    fn alpha_zero_is_uniform() {
        tch::manual_seed(13);
        let n = 3000;
        let mut pri = Priorities::new(n, 0.0, 1e-6, Device::Cpu);
        pri.added(0, n);
        let idx = Tensor::arange(n as i64, (Kind::Int64, Device::Cpu));
        pri.update(&idx, &Tensor::rand([n as i64], (Kind::Float, Device::Cpu)).g_mul_scalar(100.0));
        let d = pri.draw(256, 0.4);
        let w = Vec::<f32>::try_from(&d.weights).unwrap();
        assert!(w.iter().all(|&w| (w - 1.0).abs() < 1e-6), "equal priorities give weight 1: {w:?}");
        // Counts over 30 equal bins of 100 rows: chi-square, 29 degrees of freedom.
        let c = counts(&pri, 150_000, 250, n);
        let bins: Vec<f64> = c.chunks(100).map(|b| b.iter().sum()).collect();
        let e = 150_000.0 / 30.0;
        let chi2: f64 = bins.iter().map(|b| (b - e).powi(2) / e).sum();
        assert!(chi2 < 58.3, "chi-square {chi2:.1} (P = 0.001 at 29 d.o.f.)");
    }

    #[test]
    fn importance_weights_are_normalised_by_the_least_likely_row() {
        // w_i = (N P(i))^-beta / max_k w_k, and the largest weight is that of the least
        // likely row in the replay, drawn in the batch or not: here row 0, at p = 0.01,
        // is in about one batch of 90.
        tch::manual_seed(14);
        let ps = [0.01f64, 2.0, 4.0, 8.0];
        let mut pri = cpu(8);
        set(&mut pri, &ps.map(|p| p as f32));
        let (n, total, beta) = (4.0, ps.iter().sum::<f64>(), 0.6);
        let weight = |p: f64| (n * p / total).powf(-beta) / (n * ps[0] / total).powf(-beta);
        for _ in 0..20 {
            let d = pri.draw(16, beta);
            let idx = Vec::<i64>::try_from(&d.indices).unwrap();
            let w = Vec::<f32>::try_from(&d.weights).unwrap();
            for (&i, &w) in idx.iter().zip(&w) {
                let expected = weight(ps[i as usize]);
                assert!((w as f64 - expected).abs() < 1e-5, "row {i}: weight {w}, expected {expected}");
            }
        }
    }

    #[test]
    fn updates_land_on_the_drawn_rows_and_their_blocks() {
        tch::manual_seed(15);
        let n = 3 * BLOCK;
        let mut pri = cpu(n);
        pri.added(0, n);
        let d = pri.draw(32, 0.4);
        let idx = Vec::<i64>::try_from(&d.indices).unwrap();
        let td: Vec<f32> = (0..32).map(|k| 10.0 + k as f32).collect();
        pri.update(&d.indices, &Tensor::from_slice(&td));
        let p = Vec::<f32>::try_from(pri.values()).unwrap();
        let mut expected = vec![1.0f32; n];
        for (&i, &t) in idx.iter().zip(&td) {
            expected[i as usize] = t + 1e-6;
        }
        // Stratified draws from equal priorities hit 32 distinct rows.
        for (i, (&got, &want)) in p.iter().zip(&expected).enumerate() {
            assert!((got - want).abs() < 1e-4, "row {i}: {got} vs {want}");
        }
        let sums = Vec::<f32>::try_from(&pri.sums).unwrap();
        for (b, s) in sums.iter().enumerate() {
            let want: f32 = expected[b * BLOCK..(b + 1) * BLOCK].iter().sum();
            assert!((s - want).abs() < 1e-2, "block {b}: sum {s} vs {want}");
        }
        assert!((f32::try_from(&pri.max).unwrap() - (41.0 + 1e-6)).abs() < 1e-4, "the running maximum follows updates");
        // New rows enter at the running maximum.
        pri.added(5, 1);
        assert!((Vec::<f32>::try_from(pri.values()).unwrap()[5] - 41.0).abs() < 1e-4);
    }

    #[test]
    fn the_minimum_skips_rows_never_written() {
        let mut pri = cpu(2 * BLOCK);
        set(&mut pri, &[0.5, 2.0]);
        // Row 0 is the least likely written row: its weight is 1, row 1's is (2/0.5)^-1.
        let d = pri.draw(64, 1.0);
        let idx = Vec::<i64>::try_from(&d.indices).unwrap();
        let w = Vec::<f32>::try_from(&d.weights).unwrap();
        for (&i, &w) in idx.iter().zip(&w) {
            let want = if i == 0 { 1.0 } else { 0.25 };
            assert!((w - want).abs() < 1e-4, "row {i}: {w}");
        }
    }
}
