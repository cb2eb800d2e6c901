//! The paper's two measurements side by side, device replay against in-RAM replay:
//!
//! - the paper's Figure 3: the cost of adding one experience when the device replay
//!   writes blocks of `update_size` (1 to 10,000), next to the in-RAM replay's.
//! - its Table 1 and Figure 4: the time of one train step (sample + DQN update) at
//!   batch 16 to 256, and the speedup of the device replay in percent
//!   (`host_time / device_time - 1`, as the paper reports it); then the same step
//!   with prioritized sampling (draw by priority, weighted loss, priority update) on
//!   each replay, and what it adds to the uniform step.
//!
//! - k runs as one grouped step (`[trainer] grouped`) against their steps in turn; on
//!   CUDA also the graph step against the eager one, and the kernels of one captured
//!   step by name.
//!
//! Run: `cargo run --release -p shine-manager --example replay_bench -- [flags]`.
//! Results and the machine they came from are in `docs/benchmarks.md`.

use crate::storage::replay::{DeviceReplay, HostReplay, Replay, ReplayConfig, ReplayKind, Sampling};
use anyhow::Context;
use rand::{Rng, SeedableRng};
use shine_agent::dqn::{DqnConfig, Learner};
use shine_agent::experience::{col, TRANSITION_FLOATS};
use std::time::Instant;
use tch::Device;

const W: usize = TRANSITION_FLOATS;

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Device for the device replay and the learner: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Replay capacity for the train-step measurement (the paper: 1,000,000).
    #[arg(long, default_value_t = 1_000_000)]
    pub capacity: usize,
    /// Update sizes for the add-cost table.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000,2000,10000")]
    pub update_sizes: Vec<usize>,
    /// Experiences added one at a time per add-cost measurement (at least two blocks).
    #[arg(long, default_value_t = 50_000)]
    pub adds: usize,
    /// Batch sizes for the train-step table.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128,256")]
    pub batches: Vec<usize>,
    /// Timed train steps per batch size and replay.
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Untimed steps before each measurement.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Measurements per cell, device and in-RAM interleaved; the median is reported
    /// (a shared 2-core machine is noisy).
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Actions of the network (5: the paper's macro-actions).
    #[arg(long, default_value_t = 5)]
    pub actions: usize,
    /// libtorch threads for CPU work (0: libtorch's default, one per core; the manager's
    /// `[trainer] threads` defaults to 1).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// The learner's `[dqn] publish_average_tau` (0: no published average; above 0 each
    /// step also updates the average, which is what this measures).
    #[arg(long, default_value_t = 0.0)]
    pub publish_average_tau: f64,
    /// Batch sizes for the CUDA-graph table (eager step against one graph replay; a
    /// CUDA device only).
    #[arg(long, value_delimiter = ',', default_value = "32,128")]
    pub graph_batches: Vec<usize>,
    /// Run counts for the grouped-step table (k runs as one step against k steps in
    /// turn, at the first of --graph-batches; `[trainer] grouped`).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub group_runs: Vec<usize>,
    /// Write the captured graph of one train step (the first of --graph-batches) here
    /// in Graphviz form (CUDA only; `cudaGraphDebugDotPrint`).
    #[arg(long)]
    pub graph_dot: Option<std::path::PathBuf>,
}

impl Default for BenchArgs {
    fn default() -> Self {
        BenchArgs {
            device: "auto".into(),
            capacity: 1_000_000,
            update_sizes: vec![1, 10, 100, 1000, 2000, 10000],
            adds: 50_000,
            batches: vec![16, 32, 64, 128, 256],
            steps: 200,
            warmup: 20,
            repeats: 5,
            actions: 5,
            threads: 0,
            publish_average_tau: 0.0,
            graph_batches: vec![32, 128],
            group_runs: vec![1, 2, 4, 8],
            graph_dot: None,
        }
    }
}

/// Plausible transitions: states in [0, 1), valid actions, rewards, terminals.
fn random_rows(n: usize, actions: usize, rng: &mut impl Rng) -> Vec<f32> {
    let mut v = Vec::with_capacity(n * W);
    for _ in 0..n {
        let start = v.len();
        v.extend((0..W).map(|_| rng.random::<f32>()));
        v[start + col::ACTION] = rng.random_range(0..actions) as f32;
        v[start + col::TERMINAL] = (rng.random::<f32>() < 0.01) as u8 as f32;
    }
    v
}

/// Wait until the device has finished queued work (so timings include it).
fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// Microseconds per experience pushed one at a time.
fn add_cost(push: &mut dyn FnMut(&[f32]), rows: &[f32], device: Device) -> f64 {
    let t = Instant::now();
    for row in rows.chunks_exact(W) {
        push(row);
    }
    sync(device);
    t.elapsed().as_secs_f64() * 1e6 / (rows.len() / W) as f64
}

/// Milliseconds per train step (sample + update), `steps` timed after `warmup`.
/// Prioritized steps run as the trainer runs them: beta at its start value, the TD
/// errors written back as priorities.
fn step_time(replay: &mut Replay, learner: &mut Learner, batch: usize, warmup: usize, steps: usize) -> f64 {
    let device = learner.device();
    let mut step = |replay: &mut Replay| {
        let s = replay.sample(batch, 0.4).expect("the replay is full");
        let out = learner.train_step_weighted(&s.rows, s.drawn.as_ref().map(|d| &d.weights));
        if let (Some(drawn), Some(td_abs)) = (&s.drawn, &out.td_abs) {
            replay.update_priorities(drawn, td_abs);
        }
        out.loss
    };
    for _ in 0..warmup {
        let _ = step(replay);
    }
    sync(device);
    let t = Instant::now();
    let mut last = None;
    for _ in 0..steps {
        last = Some(step(replay));
    }
    // Reading the last loss waits for every queued step.
    let _ = last.map(|l| f64::try_from(&l));
    sync(device);
    t.elapsed().as_secs_f64() * 1e3 / steps as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let device = crate::trainer::TrainerConfig { device: args.device.clone(), ..Default::default() }.device()?;
    if args.threads > 0 {
        tch::set_num_threads(args.threads as i32);
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    println!("device: {device:?}; libtorch threads: {}", tch::get_num_threads());

    // --- Figure 3: cost of adding one experience ---
    let max_update = args.update_sizes.iter().copied().max().unwrap_or(1);
    let adds = args.adds.max(2 * max_update);
    let rows = random_rows(adds, args.actions, &mut rng);
    let add_capacity = adds.next_multiple_of(max_update);
    let repeats = args.repeats.max(1);
    let mut host = HostReplay::new(add_capacity, device)?;
    let host_us = median((0..repeats).map(|_| add_cost(&mut |r| host.push(r, &[f32::NAN]).expect("one whole row"), &rows, device)).collect());
    drop(host);
    println!("\nAdding one experience ({adds} added one at a time, median of {repeats} runs; in-RAM replay: {host_us:.3} us)\n");
    println!("| update size | device replay (us / experience) | in-RAM replay (us / experience) |");
    println!("|---:|---:|---:|");
    for &u in &args.update_sizes {
        let mut dev = DeviceReplay::new(add_capacity, u, device).with_context(|| format!("update size {u}"))?;
        let us = median((0..repeats).map(|_| add_cost(&mut |r| dev.push(r, &[f32::NAN]).expect("one whole row"), &rows, device)).collect());
        println!("| {u} | {us:.3} | {host_us:.3} |");
    }

    // --- Table 1 / Figure 4: train step time, device replay vs in-RAM replay ---
    let cfg_for = |batch| DqnConfig { batch_size: batch, publish_average_tau: args.publish_average_tau, ..Default::default() };
    let mut replays = Vec::new();
    let fill = Instant::now();
    // Device, in-RAM, then both prioritized.
    let kinds = [ReplayKind::Device, ReplayKind::Host];
    let setups = kinds.map(|k| (k, Sampling::Uniform)).into_iter().chain(kinds.map(|k| (k, Sampling::Prioritized)));
    for (kind, sampling) in setups {
        let cfg = ReplayConfig { kind, sampling, capacity: args.capacity, update_size: 2000.min(args.capacity), ..Default::default() };
        let mut r = Replay::new(&cfg, device)?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let mut left = args.capacity;
        while left > 0 {
            let n = left.min(20_000);
            r.push(&random_rows(n, args.actions, &mut rng))?;
            left -= n;
        }
        r.flush();
        replays.push(r);
    }
    println!(
        "\nTrain step (sample + update) with {} experiences in each replay (filled in {:.1} s); median of {repeats} runs of {} steps after {} warm-up\n",
        args.capacity,
        fill.elapsed().as_secs_f64(),
        args.steps,
        args.warmup
    );
    println!(
        "| batch | device replay (ms / step) | in-RAM replay (ms / step) | speedup | device, prioritized | in-RAM, prioritized | prioritized adds (device) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for &batch in &args.batches {
        let mut learners = Vec::new();
        for _ in &replays {
            tch::manual_seed(3);
            learners.push(Learner::new(&cfg_for(batch), args.actions, device)?);
        }
        let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for r in 0..repeats {
            for ((replay, learner), s) in replays.iter_mut().zip(learners.iter_mut()).zip(samples.iter_mut()) {
                s.push(step_time(replay, learner, batch, if r == 0 { args.warmup } else { 0 }, args.steps));
            }
        }
        let [d, h, dp, hp] = samples.map(median);
        let speedup = (h / d - 1.0) * 100.0;
        let adds = (dp / d - 1.0) * 100.0;
        println!("| {batch} | {d:.3} | {h:.3} | {speedup:+.1} % | {dp:.3} | {hp:.3} | {adds:+.1} % |");
    }

    // --- k runs as one grouped step, against their steps in turn ---
    let group_batch = args.graph_batches.first().copied().unwrap_or(32);
    let index = match device {
        Device::Cuda(i) => Some(i),
        _ => None,
    };
    if let Some(index) = index {
        for k in [2, 4] {
            let worst = group_graph_equals_eager(index, k, group_batch)?;
            anyhow::ensure!(worst < 1e-4, "k = {k}: the graph's group differs from the eager one by {worst} after 20 steps");
            println!("\nGrouped step, k = {k}, batch {group_batch}: one CUDA graph the same as the eager grouped step over 20 steps (losses within 1e-5, every tensor within {worst:.1e})");
        }
    }
    println!("\nk runs as one grouped step against k steps in turn (device replay, uniform, batch {group_batch}); median of {repeats} runs of {} steps", args.steps);
    println!("(run-steps/s: train steps of all k runs together per second)\n");
    println!("| k | in turn, eager (us / k steps) | grouped, eager (us) | grouped, graph (us) | run-steps / s, grouped | kernels / grouped step |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for &k in &args.group_runs {
        let (mut turns, mut eager, mut graphed) = (Vec::new(), Vec::new(), Vec::new());
        let mut kernels = None;
        for r in 0..repeats {
            let warmup = if r == 0 { args.warmup } else { 0 };
            let mut learners = group_learners(k, &cfg_for(group_batch), args.actions, device)?;
            let mut t = 0.0;
            for l in learners.iter_mut() {
                t += 1e3 * step_time(&mut replays[0], l, group_batch, warmup, args.steps);
            }
            turns.push(t);
            eager.push(group_step_time(&mut replays[0], &mut learners, group_batch, warmup, args.steps, None)?.0);
            if let Some(index) = index {
                let (us, n) = group_step_time(&mut replays[0], &mut learners, group_batch, 0, args.steps, Some(index))?;
                graphed.push(us);
                kernels = n;
            }
        }
        let (turns, eager) = (median(turns), median(eager));
        let best = if graphed.is_empty() { eager } else { median(graphed.clone()) };
        let graph = if graphed.is_empty() { "-".to_string() } else { format!("{:.1}", median(graphed)) };
        let kernels = kernels.map_or("-".to_string(), |n| n.to_string());
        println!("| {k} | {turns:.1} | {eager:.1} | {graph} | {:.0} | {kernels} |", k as f64 * 1e6 / best);
    }

    // --- The train step as one CUDA graph, against the launch limit ---
    let Some(index) = index else {
        println!("\nCUDA graph: needs a CUDA device (this run is on {device:?}): skipped");
        return Ok(());
    };
    for &batch in &args.graph_batches {
        let worst = graph_equals_eager(index, batch)?;
        anyhow::ensure!(worst < 1e-4, "batch {batch}: the graph's learner differs from the eager one by {worst} after 20 steps");
        println!("\nCUDA graph, batch {batch}: the same as the eager step over 20 steps (losses within 1e-5, every tensor within {worst:.1e})");
    }
    let floor = kernel_floor_us(index)?;
    println!("\nThe train step (device replay, uniform) eager against one CUDA-graph replay; median of {repeats} runs of {} steps", args.steps);
    println!("(the launch floor: an empty kernel costs {floor:.2} us inside a graph)\n");
    println!("| batch | eager (us / step) | graph (us / step) | graph (steps / s) | kernels / step | kernels x floor (us) | graph / floor |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let replay = &mut replays[0];
    for &batch in &args.graph_batches {
        tch::manual_seed(3);
        let mut eager = Learner::new(&cfg_for(batch), args.actions, device)?;
        tch::manual_seed(3);
        let mut graphed = Learner::new(&cfg_for(batch), args.actions, device)?;
        let (mut e, mut g) = (Vec::new(), Vec::new());
        let mut kernels = 0;
        for r in 0..repeats {
            let warmup = if r == 0 { args.warmup } else { 0 };
            e.push(1e3 * step_time(replay, &mut eager, batch, warmup, args.steps));
            let (us, k) = graph_step_time(replay, &mut graphed, batch, index, args.steps)?;
            g.push(us);
            kernels = k;
        }
        let (e, g) = (median(e), median(g));
        let limit = kernels as f64 * floor;
        println!("| {batch} | {e:.1} | {g:.1} | {:.0} | {kernels} | {limit:.1} | {:.2} |", 1e6 / g, g / limit);
    }
    // Where one step's time goes: the kernels it launches, by name.
    let names = graph_kernel_names(replay, &cfg_for(group_batch), args.actions, index, args.graph_dot.as_deref())?;
    println!("\nKernels of one captured train step (batch {group_batch}), by name: {} in all", names.len());
    if let Some(dot) = &args.graph_dot {
        println!("(the graph in Graphviz form: {})", dot.display());
    }
    println!("\n| count | kernel |");
    println!("|---:|---|");
    for (count, name) in crate::trainer::cuda_graph::kernel_counts(&names) {
        println!("| {count} | `{name}` |");
    }
    Ok(())
}

/// `k` learners of one shape, each with its own learning rate and discount (as the
/// runs of a group differ), fresh weights.
fn group_learners(k: usize, cfg: &DqnConfig, actions: usize, device: Device) -> anyhow::Result<Vec<Learner>> {
    (0..k)
        .map(|i| {
            let cfg = DqnConfig { lr: cfg.lr * (1.0 + i as f64 * 0.25), gamma: 0.99 - 0.001 * i as f64, ..cfg.clone() };
            Ok(Learner::new(&cfg, actions, device)?)
        })
        .collect()
}

/// Microseconds per grouped step of `learners` (each batch drawn from `replay`, as each
/// run's from its own), eager, or with `graph` (a CUDA device index) replayed as one
/// captured graph after three eager steps; with a graph, also the kernels it launches.
fn group_step_time(replay: &mut Replay, learners: &mut [Learner], batch: usize, warmup: usize, steps: usize, graph: Option<usize>) -> anyhow::Result<(f64, Option<usize>)> {
    let device = learners[0].device();
    let k = learners.len();
    let mut members: Vec<&mut Learner> = learners.iter_mut().collect();
    let mut group = shine_agent::dqn::Group::new(&mut members)?;
    let draw = |replay: &mut Replay| -> anyhow::Result<tch::Tensor> {
        let rows = (0..k).map(|_| Ok(replay.sample(batch, 1.0)?.rows)).collect::<anyhow::Result<Vec<_>>>()?;
        Ok(tch::Tensor::stack(&rows, 0))
    };
    let step = |replay: &mut Replay, group: &mut shine_agent::dqn::Group| -> anyhow::Result<tch::Tensor> { Ok(group.device_step(&draw(replay)?).loss) };
    for _ in 0..warmup.max(if graph.is_some() { 3 } else { 0 }) {
        let _ = step(replay, &mut group)?;
    }
    let mut captured = match graph {
        None => None,
        Some(index) => {
            let mut g = crate::trainer::cuda_graph::CudaGraph::new()?;
            let out = g.capture(index, || step(replay, &mut group))??;
            let (_, kernels) = g.count()?;
            Some((g, out, kernels))
        }
    };
    sync(device);
    let t = Instant::now();
    let mut last = None;
    for _ in 0..steps {
        last = Some(match captured.as_mut() {
            Some((g, out, _)) => {
                g.replay()?;
                out.shallow_clone()
            }
            None => step(replay, &mut group)?,
        });
    }
    // Reading the last losses waits for every queued step.
    let _ = last.map(|l| f64::try_from(&l.sum(tch::Kind::Float)));
    sync(device);
    Ok((t.elapsed().as_secs_f64() * 1e6 / steps as f64, captured.map(|c| c.2)))
}

/// The same 20 batches through two learners of the same weights on CUDA device
/// `index`, one stepping eagerly, one replaying a captured graph of its step (its batch
/// read from one static tensor, refilled before each replay): the losses of each step
/// and the learners' tensors afterwards (online, target, optimizer state) agree. Returns
/// the largest difference of any tensor element; errs on a loss that differs.
pub fn graph_equals_eager(index: usize, batch: usize) -> anyhow::Result<f64> {
    let device = Device::Cuda(index);
    let cfg = DqnConfig { batch_size: batch, target_sync_every: 7, ..Default::default() };
    tch::manual_seed(11);
    let mut eager = Learner::new(&cfg, 5, device)?;
    tch::manual_seed(11);
    let mut graphed = Learner::new(&cfg, 5, device)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(4);
    let batches: Vec<tch::Tensor> = (0..20).map(|_| tch::Tensor::from_slice(&random_rows(batch, 5, &mut rng)).view([batch as i64, W as i64]).to_device(device)).collect();
    let mut input = batches[0].copy();
    for b in &batches[..3] {
        eager.train_step(b);
        graphed.train_step(b);
    }
    let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
    let out = graph.capture(index, || graphed.device_step(&input, None))?;
    for (i, b) in batches.iter().enumerate().skip(3) {
        let e = eager.train_step(b);
        input.copy_(b);
        graph.replay()?;
        graphed.finish_step();
        let (le, lg) = (f64::try_from(&e.loss)?, f64::try_from(&out.loss)?);
        anyhow::ensure!((le - lg).abs() <= 1e-5 * le.abs().max(1.0), "batch {batch}, step {i}: loss eager {le}, graph {lg}");
    }
    anyhow::ensure!(eager.step == graphed.step && eager.optimizer_steps() == graphed.optimizer_steps(), "the step counts differ");
    let mut worst = 0.0f64;
    for (a, b) in eager.state_tensors().iter().zip(graphed.state_tensors()) {
        worst = worst.max(f64::try_from((&a.1 - &b.1).abs().max())?);
    }
    Ok(worst)
}

/// The same 20 stacked batches through two groups of `k` learners of the same weights
/// on CUDA device `index`, one stepping eagerly, one replaying a captured graph of its
/// step (the batch read from one static tensor, refilled before each replay), with a
/// mask that holds the last run back every other step: the losses of each step and
/// every learner's tensors afterwards agree. Returns the largest difference of any
/// tensor element; errs on a loss that differs.
pub fn group_graph_equals_eager(index: usize, k: usize, batch: usize) -> anyhow::Result<f64> {
    let device = Device::Cuda(index);
    let cfg = DqnConfig { batch_size: batch, target_sync_every: 7, ..Default::default() };
    tch::manual_seed(12);
    let mut eager = group_learners(k, &cfg, 5, device)?;
    tch::manual_seed(12);
    let mut graphed = group_learners(k, &cfg, 5, device)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    let batches: Vec<tch::Tensor> =
        (0..20).map(|_| tch::Tensor::from_slice(&random_rows(k * batch, 5, &mut rng)).view([k as i64, batch as i64, W as i64]).to_device(device)).collect();
    let mut input = batches[0].copy();
    let (mut ge, mut gg) = {
        let (mut e, mut g): (Vec<&mut Learner>, Vec<&mut Learner>) = (eager.iter_mut().collect(), graphed.iter_mut().collect());
        (shine_agent::dqn::Group::new(&mut e)?, shine_agent::dqn::Group::new(&mut g)?)
    };
    let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
    let mut out = None;
    for (i, b) in batches.iter().enumerate() {
        let moves: Vec<bool> = (0..k).map(|r| r + 1 < k || i % 2 == 0).collect();
        ge.set_mask(&moves);
        gg.set_mask(&moves);
        let e = ge.device_step(b);
        if i < 3 {
            // Eager warm-up steps, as the trainer takes before its first capture.
            gg.device_step(b);
        } else {
            input.copy_(b);
            if out.is_none() {
                out = Some(graph.capture(index, || gg.device_step(&input))?);
            }
            graph.replay()?;
        }
        for (r, &m) in moves.iter().enumerate() {
            if m {
                eager[r].finish_step();
                graphed[r].finish_step();
            }
        }
        if let Some(o) = out.as_ref().filter(|_| i >= 3) {
            for r in 0..k {
                let (le, lg) = (f64::try_from(&e.loss.get(r as i64))?, f64::try_from(&o.loss.get(r as i64))?);
                anyhow::ensure!((le - lg).abs() <= 1e-5 * le.abs().max(1.0), "k {k}, step {i}, run {r}: loss eager {le}, graph {lg}");
            }
        }
    }
    let mut worst = 0.0f64;
    for (a, b) in eager.iter().zip(&graphed) {
        anyhow::ensure!(a.step == b.step && a.optimizer_steps() == b.optimizer_steps(), "the step counts differ");
        for (x, y) in a.state_tensors().iter().zip(b.state_tensors()) {
            worst = worst.max(f64::try_from((&x.1 - &y.1).abs().max())?);
        }
    }
    Ok(worst)
}

/// The kernels one captured train step launches (device replay, uniform, after three
/// eager steps), by name; with `dot`, the graph is also written there in Graphviz form.
fn graph_kernel_names(replay: &mut Replay, cfg: &DqnConfig, actions: usize, index: usize, dot: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let mut learner = Learner::new(cfg, actions, Device::Cuda(index))?;
    for _ in 0..3 {
        learner.train_step(&replay.sample(cfg.batch_size, 1.0)?.rows);
    }
    let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
    graph.capture(index, || -> anyhow::Result<_> { Ok(learner.device_step(&replay.sample(cfg.batch_size, 1.0)?.rows, None)) })??;
    Ok(graph.kernel_names(dot)?)
}

/// Microseconds per train step replayed as one captured graph (sample + update), and
/// the kernels one replay launches. Captured after three eager steps, as the trainer
/// does.
fn graph_step_time(replay: &mut Replay, learner: &mut Learner, batch: usize, index: usize, steps: usize) -> anyhow::Result<(f64, usize)> {
    for _ in 0..3 {
        let s = replay.sample(batch, 1.0)?;
        learner.train_step(&s.rows);
    }
    let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
    let out = graph.capture(index, || -> anyhow::Result<_> { Ok(learner.device_step(&replay.sample(batch, 1.0)?.rows, None)) })??;
    let (_, kernels) = graph.count()?;
    graph.replay()?;
    learner.finish_step();
    sync(learner.device());
    let t = Instant::now();
    for _ in 0..steps {
        graph.replay()?;
        learner.finish_step();
    }
    let _ = f64::try_from(&out.loss);
    sync(learner.device());
    Ok((t.elapsed().as_secs_f64() * 1e6 / steps as f64, kernels))
}

/// What an empty kernel costs inside a graph on CUDA device `index` (microseconds):
/// 200 one-element adds captured, replayed 50 times.
fn kernel_floor_us(index: usize) -> anyhow::Result<f64> {
    let device = Device::Cuda(index);
    let mut x = tch::Tensor::zeros([1], (tch::Kind::Float, device));
    let mut graph = crate::trainer::cuda_graph::CudaGraph::new()?;
    graph.capture(index, || {
        for _ in 0..200 {
            let _ = x.g_add_scalar_(1.0);
        }
    })?;
    let (_, kernels) = graph.count()?;
    graph.replay()?;
    sync(device);
    let t = Instant::now();
    for _ in 0..50 {
        graph.replay()?;
    }
    sync(device);
    Ok(t.elapsed().as_secs_f64() * 1e6 / (50 * kernels.max(1)) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The benchmark's code paths on a toy size (timings are not checked).
    #[test]
    fn bench_runs_end_to_end_on_a_tiny_configuration() {
        let args = BenchArgs {
            device: "cpu".into(),
            capacity: 4000,
            update_sizes: vec![1, 100],
            adds: 300,
            batches: vec![16],
            steps: 2,
            warmup: 1,
            repeats: 2,
            actions: 5,
            threads: 0,
            publish_average_tau: 0.01,
            graph_batches: vec![32],
            group_runs: vec![1, 2],
            graph_dot: None,
        };
        run(args).unwrap();
    }

    /// On a GPU: the graph step equals the eager one (replay_bench runs the same check
    /// on CUDA, before its graph table).
    #[test]
    #[ignore = "needs a CUDA device: scripts/gpu-check.sh runs replay_bench, which checks this"]
    fn graph_step_equals_the_eager_step_over_20_steps() {
        assert!(tch::Cuda::is_available(), "this test needs a CUDA device");
        for batch_size in [32, 128] {
            let worst = graph_equals_eager(0, batch_size).unwrap();
            assert!(worst < 1e-4, "batch {batch_size}: {worst}");
        }
    }

    #[test]
    fn random_rows_are_valid_transitions() {
        let rows = random_rows(500, 5, &mut rand::rngs::SmallRng::seed_from_u64(0));
        for r in rows.chunks_exact(W) {
            assert!(r[col::ACTION].fract() == 0.0 && (r[col::ACTION] as usize) < 5);
            assert!(r[col::TERMINAL] == 0.0 || r[col::TERMINAL] == 1.0);
        }
    }
}

