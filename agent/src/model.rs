//! The model file and pure-Rust inference.
//!
//! A model is one safetensors file, the same bytes everywhere: what the manager
//! publishes, what workers load, what the dashboard offers for download, and what
//! PyTorch loads (`safetensors.torch.load_file` gives a `state_dict` for a module with
//! `nn.Linear` attributes named as in [`TENSORS`]). Network (the paper's Dueling DQN):
//!
//! ```text
//! state (27) ─ shared 128, ReLU ─┬─ value_hidden 512, ReLU ─ value 1 ──────────┐
//!                                └─ advantage_hidden 512, ReLU ─ advantage A ─ Q = V + A - mean(A)
//! ```
//!
//! Metadata (all strings, as safetensors requires): `format` = "shine-dueling-dqn",
//! `format_version`, `state_dim`, `action_set`, `action_count`, `layers`
//! ("27,128,512"), `model_version`, `train_step`, and `side` ("fox" or "marth", the
//! fighter the model plays; files written before it existed have none and are Fox's).
//! `docs/model-format.md` is the reference.
//!
//! [`QNet::forward`] is batched: one call computes Q for every environment that needs
//! an action this frame, with `matrixmultiply`'s SIMD sgemm and buffers reused across
//! calls (no allocation per decision). The sgemm call is the module's one `unsafe`,
//! in `model/sgemm.rs`, behind a bounds-checked function.

mod sgemm;

use crate::side::Side;
use crate::state::STATE_DIM;
use std::collections::HashMap;
use thiserror::Error;

pub const FORMAT: &str = "shine-dueling-dqn";
pub const FORMAT_VERSION: u32 = 1;
pub const SHARED: usize = 128;
pub const STREAM: usize = 512;

/// Tensor names, as PyTorch's `state_dict` names them.
pub const TENSORS: [&str; 10] = [
    "shared.weight",
    "shared.bias",
    "value_hidden.weight",
    "value_hidden.bias",
    "value.weight",
    "value.bias",
    "advantage_hidden.weight",
    "advantage_hidden.bias",
    "advantage.weight",
    "advantage.bias",
];

/// The file's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelMeta {
    pub action_set: String,
    pub action_count: usize,
    pub shared: usize,
    pub stream: usize,
    pub model_version: u64,
    pub train_step: u64,
    /// The fighter the model plays.
    pub side: Side,
}

impl ModelMeta {
    /// A Fox model's metadata (see [`ModelMeta::with_side`]).
    pub fn new(action_set: &str, action_count: usize) -> Self {
        ModelMeta { action_set: action_set.into(), action_count, shared: SHARED, stream: STREAM, model_version: 0, train_step: 0, side: Side::Fox }
    }

    pub fn with_side(self, side: Side) -> Self {
        ModelMeta { side, ..self }
    }

    /// `[out, in]` shape of each tensor in [`TENSORS`] order (biases are `[out]`).
    pub fn shapes(&self) -> [Vec<usize>; 10] {
        let (h, s, a) = (self.shared, self.stream, self.action_count);
        [vec![h, STATE_DIM], vec![h], vec![s, h], vec![s], vec![1, s], vec![1], vec![s, h], vec![s], vec![a, s], vec![a]]
    }

    fn to_map(&self) -> HashMap<String, String> {
        [
            ("format", FORMAT.to_string()),
            ("format_version", FORMAT_VERSION.to_string()),
            ("state_dim", STATE_DIM.to_string()),
            ("action_set", self.action_set.clone()),
            ("action_count", self.action_count.to_string()),
            ("layers", format!("{STATE_DIM},{},{}", self.shared, self.stream)),
            ("model_version", self.model_version.to_string()),
            ("train_step", self.train_step.to_string()),
            ("side", self.side.name().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn from_map(m: &HashMap<String, String>) -> Result<Self, ModelError> {
        let get = |k: &str| m.get(k).ok_or_else(|| ModelError::Metadata(format!("missing key {k:?}")));
        let num = |k: &str| -> Result<u64, ModelError> { get(k)?.parse().map_err(|_| ModelError::Metadata(format!("{k:?} is not a number"))) };
        if get("format")? != FORMAT {
            return Err(ModelError::Metadata(format!("format is {:?}, expected {FORMAT:?}", m["format"])));
        }
        if num("format_version")? != FORMAT_VERSION as u64 {
            return Err(ModelError::Metadata(format!("format_version {} is not supported (expected {FORMAT_VERSION})", m["format_version"])));
        }
        if num("state_dim")? != STATE_DIM as u64 {
            return Err(ModelError::Metadata(format!("state_dim {} does not match {STATE_DIM}", m["state_dim"])));
        }
        let layers: Vec<usize> = get("layers")?
            .split(',')
            .map(|s| s.trim().parse())
            .collect::<Result<_, _>>()
            .map_err(|_| ModelError::Metadata("layers is not a list of numbers".into()))?;
        let [_, shared, stream] = layers[..] else {
            return Err(ModelError::Metadata(format!("layers {layers:?} must be [state, shared, stream]")));
        };
        let action_count = num("action_count")? as usize;
        if action_count == 0 || action_count > 4096 || shared == 0 || stream == 0 || shared > 65536 || stream > 65536 {
            return Err(ModelError::Metadata("layer sizes out of range".into()));
        }
        Ok(ModelMeta {
            action_set: get("action_set")?.clone(),
            action_count,
            shared,
            stream,
            model_version: num("model_version")?,
            train_step: num("train_step")?,
            // Files from before sides existed are Fox's: the only side there was.
            side: match m.get("side") {
                None => Side::Fox,
                Some(s) => s.parse().map_err(ModelError::Metadata)?,
            },
        })
    }
}

#[derive(Debug, Error)]
pub enum ModelError {
    #[error("not a safetensors file: {0}")]
    Safetensors(String),
    #[error("model metadata: {0}")]
    Metadata(String),
    #[error("tensor {name}: {problem}")]
    Tensor { name: String, problem: String },
    #[error("the model's shapes differ from those of the network it was to be loaded into")]
    Shape,
}

/// Serialize weights (in [`TENSORS`] order, row-major f32) with `meta` as a model file.
pub fn save(meta: &ModelMeta, weights: &[Vec<f32>]) -> Result<Vec<u8>, ModelError> {
    use safetensors::tensor::{Dtype, TensorView};
    let shapes = meta.shapes();
    if weights.len() != TENSORS.len() {
        return Err(ModelError::Metadata(format!("{} tensors given, {} expected", weights.len(), TENSORS.len())));
    }
    let bytes: Vec<Vec<u8>> = weights.iter().map(|w| w.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
    let mut views = Vec::new();
    for ((name, shape), b) in TENSORS.iter().zip(shapes.iter()).zip(bytes.iter()) {
        let view = TensorView::new(Dtype::F32, shape.clone(), b).map_err(|e| ModelError::Tensor { name: name.to_string(), problem: e.to_string() })?;
        views.push((name.to_string(), view));
    }
    safetensors::serialize(views, Some(meta.to_map())).map_err(|e| ModelError::Safetensors(e.to_string()))
}

/// A dense layer, weights `[out, in]` row-major as PyTorch stores them.
#[derive(Clone)]
struct Dense {
    w: Vec<f32>,
    b: Vec<f32>,
    n_in: usize,
    n_out: usize,
}

/// Batches up to this size are multiplied a weight row at a time ([`Dense::forward_small`]):
/// a worker with one environment decides one state at a time, and packing the whole
/// weight matrix for a single row (what the general kernel does) cost more than the
/// product itself. Larger batches go to matrixmultiply's packed kernel. Chosen with
/// `cargo run --release -p shine-worker --example decision_bench` (docs/benchmarks.md).
const SMALL_BATCH: usize = 4;

/// `a . b`, summed in `LANES` (32) independent accumulators: the compiler keeps them in
/// SIMD registers, where one running sum would be a single dependency chain (float
/// addition may not be reordered for it).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 32;
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

impl Dense {
    /// `y[n, out] = x[n, in] . w^T + b`, then ReLU if asked.
    fn forward(&self, x: &[f32], n: usize, y: &mut [f32], relu: bool) {
        debug_assert!(x.len() >= n * self.n_in && y.len() >= n * self.n_out);
        if n <= SMALL_BATCH {
            self.forward_small(x, n, y);
        } else {
            self.forward_gemm(x, n, y);
        }
        if relu {
            for v in &mut y[..n * self.n_out] {
                *v = v.max(0.0);
            }
        }
    }

    /// A few rows: each weight row is read once and used for every input row while it
    /// is in L1.
    fn forward_small(&self, x: &[f32], n: usize, y: &mut [f32]) {
        for (o, (w, b)) in self.w.chunks_exact(self.n_in).zip(&self.b).enumerate() {
            for r in 0..n {
                y[r * self.n_out + o] = b + dot(w, &x[r * self.n_in..(r + 1) * self.n_in]);
            }
        }
    }

    fn forward_gemm(&self, x: &[f32], n: usize, y: &mut [f32]) {
        // Bias first, then accumulate the product onto it (beta = 1).
        for row in y[..n * self.n_out].chunks_exact_mut(self.n_out) {
            row.copy_from_slice(&self.b);
        }
        sgemm::add_x_wt(x, &self.w, y, n, self.n_in, self.n_out);
    }
}

/// The Dueling DQN for inference on the CPU, without libtorch.
#[derive(Clone)]
pub struct QNet {
    meta: ModelMeta,
    shared: Dense,
    value_hidden: Dense,
    value: Dense,
    advantage_hidden: Dense,
    advantage: Dense,
}

/// Reusable activations for [`QNet::forward`]; grows to the largest batch seen.
#[derive(Default)]
pub struct Scratch {
    h: Vec<f32>,
    vh: Vec<f32>,
    ah: Vec<f32>,
    v: Vec<f32>,
}

impl QNet {
    /// Load and check a model file (every tensor present, shapes as the metadata says,
    /// f32, finite).
    pub fn load(bytes: &[u8]) -> Result<QNet, ModelError> {
        let (meta, st) = parse(bytes)?;
        let mut t = checked_tensors(&st, &meta)?.into_iter().map(|data| data.chunks_exact(4).map(f32_le).collect::<Vec<f32>>());
        let mut dense = |n_in, n_out| Dense { w: t.next().unwrap(), b: t.next().unwrap(), n_in, n_out };
        let (h, s, a) = (meta.shared, meta.stream, meta.action_count);
        Ok(QNet { shared: dense(STATE_DIM, h), value_hidden: dense(h, s), value: dense(s, 1), advantage_hidden: dense(h, s), advantage: dense(s, a), meta })
    }

    /// Load a model file into this network's own buffers, allocating no weights: how a
    /// worker swaps models without its memory growing (the Parallel Joint PPO lesson).
    /// The file must have this network's shapes ([`ModelError::Shape`] otherwise); it
    /// is checked whole before anything is written, so a bad file changes nothing.
    pub fn load_into(&mut self, bytes: &[u8]) -> Result<(), ModelError> {
        let (meta, st) = parse(bytes)?;
        if meta.shapes() != self.meta.shapes() {
            return Err(ModelError::Shape);
        }
        let tensors = checked_tensors(&st, &meta)?;
        for (dst, data) in self.buffers_mut().into_iter().zip(tensors) {
            for (d, c) in dst.iter_mut().zip(data.chunks_exact(4)) {
                *d = f32_le(c);
            }
        }
        self.meta = meta;
        Ok(())
    }

    /// The weight buffers in [`TENSORS`] order.
    fn buffers_mut(&mut self) -> [&mut Vec<f32>; 10] {
        let [a, b, c, d, e] = [&mut self.shared, &mut self.value_hidden, &mut self.value, &mut self.advantage_hidden, &mut self.advantage];
        [&mut a.w, &mut a.b, &mut b.w, &mut b.b, &mut c.w, &mut c.b, &mut d.w, &mut d.b, &mut e.w, &mut e.b]
    }

    /// Where the first weight buffer lives: tells a reused network from a new one.
    pub fn weights_addr(&self) -> usize {
        self.shared.w.as_ptr() as usize
    }

    pub fn meta(&self) -> &ModelMeta {
        &self.meta
    }
    pub fn action_count(&self) -> usize {
        self.meta.action_count
    }

    /// Q-values for `n` states (`states`: n x 27) into `q` (n x actions).
    pub fn forward(&self, states: &[f32], n: usize, q: &mut [f32], s: &mut Scratch) {
        assert!(states.len() >= n * STATE_DIM && q.len() >= n * self.meta.action_count, "forward: buffers too small");
        let grow = |v: &mut Vec<f32>, len: usize| {
            if v.len() < len {
                v.resize(len, 0.0);
            }
        };
        grow(&mut s.h, n * self.meta.shared);
        grow(&mut s.vh, n * self.meta.stream);
        grow(&mut s.ah, n * self.meta.stream);
        grow(&mut s.v, n);
        self.shared.forward(states, n, &mut s.h, true);
        self.value_hidden.forward(&s.h, n, &mut s.vh, true);
        self.value.forward(&s.vh, n, &mut s.v, false);
        self.advantage_hidden.forward(&s.h, n, &mut s.ah, true);
        let a = self.meta.action_count;
        self.advantage.forward(&s.ah, n, q, false);
        for (row, v) in q[..n * a].chunks_exact_mut(a).zip(&s.v) {
            let mean = row.iter().sum::<f32>() / a as f32;
            for x in row {
                *x += v - mean;
            }
        }
    }

    /// Index of the largest Q-value of one row (first on ties).
    pub fn argmax(q: &[f32]) -> usize {
        q.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best }).0
    }
}

fn f32_le(c: &[u8]) -> f32 {
    f32::from_le_bytes([c[0], c[1], c[2], c[3]])
}

/// The metadata and the tensors of a model file.
fn parse(bytes: &[u8]) -> Result<(ModelMeta, safetensors::SafeTensors<'_>), ModelError> {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| ModelError::Safetensors(e.to_string()))?;
    let meta = ModelMeta::from_map(header.metadata().as_ref().ok_or_else(|| ModelError::Metadata("no metadata".into()))?)?;
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| ModelError::Safetensors(e.to_string()))?;
    Ok((meta, st))
}

/// Every tensor's raw little-endian bytes in [`TENSORS`] order, each checked: present,
/// f32, the shape the metadata says, finite.
fn checked_tensors<'a>(st: &safetensors::SafeTensors<'a>, meta: &ModelMeta) -> Result<Vec<&'a [u8]>, ModelError> {
    let mut out = Vec::with_capacity(TENSORS.len());
    for (name, shape) in TENSORS.iter().zip(meta.shapes().iter()) {
        let bad = |problem: String| ModelError::Tensor { name: name.to_string(), problem };
        let view = st.tensor(name).map_err(|_| bad("missing".into()))?;
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(bad(format!("dtype {:?}, expected F32", view.dtype())));
        }
        if view.shape() != shape.as_slice() {
            return Err(bad(format!("shape {:?}, expected {:?}", view.shape(), shape)));
        }
        if view.data().chunks_exact(4).any(|c| !f32_le(c).is_finite()) {
            return Err(bad("holds NaN or infinity".into()));
        }
        out.push(view.data());
    }
    Ok(out)
}

/// Random weights with PyTorch's default `nn.Linear` init (uniform +/- 1/sqrt(in)):
/// the model a fresh manager publishes before training, and test fixtures.
pub fn random_weights(meta: &ModelMeta, rng: &mut impl rand::Rng) -> Vec<Vec<f32>> {
    meta.shapes()
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let fan_in = if i % 2 == 0 { shape[1] } else { meta.shapes()[i - 1][1] };
            let bound = 1.0 / (fan_in as f32).sqrt();
            (0..shape.iter().product::<usize>()).map(|_| rng.random_range(-bound..bound)).collect()
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::SeedableRng;

    fn model(a: usize) -> (ModelMeta, Vec<Vec<f32>>) {
        let mut meta = ModelMeta::new("test", a);
        meta.model_version = 3;
        meta.train_step = 1234;
        let w = random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
        (meta, w)
    }

    /// The network in float64, and for each Q value a bound on how far a float32
    /// computation of it may be, in any summation order: a dot product of `K` terms is
    /// within `γ(K) Σ|terms|` (Higham (3.5); `γ(K) = K u / (1 - K u)`, `u = 2^-24`), and
    /// an error in a layer's input carries through its `|W|`. `K` is the most terms any
    /// implementation sums: the 27 inputs padded to 32, the heads over both streams' 1,024
    /// units, the dueling combination over the heads' padded width; each plus the bias.
    /// The numerics tests of inference (here, and tch's forward in `dqn.rs`) hold a
    /// float32 computation to this.
    pub(crate) fn reference_with_bound(w: &[Vec<f32>], meta: &ModelMeta, x: &[f32]) -> Vec<(f64, f64)> {
        const U: f64 = 1.0 / 16_777_216.0;
        let gamma = |k: usize| k as f64 * U / (1.0 - k as f64 * U);
        // (value, magnitude, error) of each output of one layer.
        let lin = |wi: usize, x: &[(f64, f64, f64)], k: usize, relu: bool| -> Vec<(f64, f64, f64)> {
            let (wt, b) = (&w[wi], &w[wi + 1]);
            (0..b.len())
                .map(|o| {
                    let row = &wt[o * x.len()..(o + 1) * x.len()];
                    let v = b[o] as f64 + row.iter().zip(x).map(|(&w, &(v, _, _))| w as f64 * v).sum::<f64>();
                    let m = (b[o] as f64).abs() + row.iter().zip(x).map(|(&w, &(_, m, e))| (w as f64).abs() * (m + e)).sum::<f64>();
                    let e = row.iter().zip(x).map(|(&w, &(_, _, e))| (w as f64).abs() * e).sum::<f64>() + gamma(k + 1) * m;
                    (if relu { v.max(0.0) } else { v }, m, e)
                })
                .collect()
        };
        let x: Vec<(f64, f64, f64)> = x.iter().map(|&v| (v as f64, (v as f64).abs(), 0.0)).collect();
        let h = lin(0, &x, 32, true);
        let value = lin(4, &lin(2, &h, meta.shared, true), 2 * meta.stream, false)[0];
        let adv = lin(8, &lin(6, &h, meta.shared, true), 2 * meta.stream, false);
        let n = adv.len() as f64;
        let mean = |f: fn(&(f64, f64, f64)) -> f64| adv.iter().map(f).sum::<f64>() / n;
        let (mv, mm, me) = (mean(|a| a.0), mean(|a| a.1 + a.2), mean(|a| a.2));
        let k_q = (1 + adv.len()).div_ceil(4) * 4 + 2;
        adv.iter()
            .map(|a| {
                let m = value.1 + value.2 + a.1 + a.2 + mm;
                (value.0 + a.0 - mv, value.2 + a.2 + me + gamma(k_q) * m)
            })
            .collect()
    }

    #[test]
    fn save_load_round_trip_keeps_metadata() {
        let (meta, w) = model(5);
        let net = QNet::load(&save(&meta, &w).unwrap()).unwrap();
        assert_eq!(net.meta(), &meta);
    }

    #[test]
    fn the_side_is_kept_and_a_file_without_one_is_fox() {
        use safetensors::tensor::{Dtype, TensorView};
        let (meta, w) = model(5);
        let marth = meta.clone().with_side(Side::Marth);
        assert_eq!(QNet::load(&save(&marth, &w).unwrap()).unwrap().meta().side, Side::Marth);
        // The same file written with another `side` value, or with none (as before sides).
        let with = |side: Option<&str>| {
            let mut map = marth.to_map();
            match side {
                Some(s) => map.insert("side".into(), s.into()),
                None => map.remove("side"),
            };
            let bytes: Vec<Vec<u8>> = w.iter().map(|t| t.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
            let views: Vec<_> =
                TENSORS.iter().zip(marth.shapes()).zip(&bytes).map(|((n, s), b)| (n.to_string(), TensorView::new(Dtype::F32, s, b).unwrap())).collect();
            safetensors::serialize(views, Some(map)).unwrap()
        };
        assert_eq!(QNet::load(&with(None)).unwrap().meta().side, Side::Fox);
        let err = QNet::load(&with(Some("falco"))).err().expect("an unknown side is refused").to_string();
        assert!(err.contains("unknown side \"falco\""), "{err}");
    }

    /// Both kernels (row at a time up to SMALL_BATCH, packed above; one scratch for all
    /// sizes, as a worker reuses it) within float32 rounding of the network in float64.
    #[test]
    fn numerics_batched_forward_is_the_float64_network() {
        let (meta, w) = model(7);
        let net = QNet::load(&save(&meta, &w).unwrap()).unwrap();
        let mut scratch = Scratch::default();
        let mut margin = 0.0f64;
        for n in [1, 2, SMALL_BATCH, SMALL_BATCH + 1, 9, 1] {
            let states: Vec<f32> = (0..n * STATE_DIM).map(|i| ((i * 37 % 101) as f32) / 101.0 - 0.3).collect();
            let mut q = vec![0.0; n * 7];
            net.forward(&states, n, &mut q, &mut scratch);
            for r in 0..n {
                let want = reference_with_bound(&w, &meta, &states[r * STATE_DIM..(r + 1) * STATE_DIM]);
                for (a, (&g, &(v, bound))) in q[r * 7..(r + 1) * 7].iter().zip(&want).enumerate() {
                    let off = (g as f64 - v).abs();
                    assert!(off <= bound, "batch {n}, row {r}, action {a}: {g}, float64 {v}, off by {off:e} > {bound:e}");
                    margin = margin.max(off / bound);
                }
            }
        }
        println!("largest error / bound {margin:.2e}");
    }

    #[test]
    fn bad_files_are_errors() {
        let (meta, w) = model(5);
        assert!(QNet::load(b"not a model").is_err());
        let mut wrong = w.clone();
        wrong[8].pop();
        assert!(save(&meta, &wrong).is_err());
        let mut nan = w.clone();
        nan[0][0] = f32::NAN;
        assert!(matches!(QNet::load(&save(&meta, &nan).unwrap()), Err(ModelError::Tensor { .. })));
        let bytes = save(&meta, &w).unwrap();
        assert!(QNet::load(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn argmax_picks_first_largest() {
        assert_eq!(QNet::argmax(&[0.0, 2.0, 2.0, -1.0]), 1);
    }

    #[test]
    fn load_into_reuses_the_buffers_and_a_bad_file_changes_nothing() {
        let (meta, w1) = model(5);
        let (_, w2) = model(5);
        let w2: Vec<Vec<f32>> = w2.into_iter().map(|t| t.into_iter().map(|x| x * 0.5 + 0.01).collect()).collect();
        let (f1, f2) = (save(&meta, &w1).unwrap(), save(&meta, &w2).unwrap());
        let mut net = QNet::load(&f1).unwrap();
        let addr = net.weights_addr();
        net.load_into(&f2).unwrap();
        assert_eq!(net.weights_addr(), addr, "the same buffers");
        let fresh = QNet::load(&f2).unwrap();
        let x: Vec<f32> = (0..3 * STATE_DIM).map(|i| (i % 7) as f32 / 7.0).collect();
        let (mut q1, mut q2, mut s) = (vec![0.0; 15], vec![0.0; 15], Scratch::default());
        net.forward(&x, 3, &mut q1, &mut s);
        fresh.forward(&x, 3, &mut q2, &mut s);
        assert_eq!(q1, q2, "loaded into equals loaded fresh");
        // A NaN in the last tensor: refused, and the network is still the second model.
        let mut bad_w = w2.clone();
        *bad_w.last_mut().unwrap().last_mut().unwrap() = f32::NAN;
        assert!(matches!(net.load_into(&save(&meta, &bad_w).unwrap()), Err(ModelError::Tensor { .. })));
        net.forward(&x, 3, &mut q1, &mut s);
        assert_eq!(q1, q2, "a bad file changed nothing");
        // Another action count: a different shape.
        let (meta6, w6) = model(6);
        assert!(matches!(net.load_into(&save(&meta6, &w6).unwrap()), Err(ModelError::Shape)));
    }
}
