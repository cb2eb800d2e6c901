//! The paper's two measurements side by side, device replay against in-RAM replay:
//!
//! - the paper's Figure 3: the cost of adding one experience when the device replay
//!   writes blocks of `update_size` (1 to 10,000), next to the in-RAM replay's.
//! - its Table 1 and Figure 4: the time of one train step (sample + DQN update) at
//!   batch 16 to 256, and the speedup of the device replay in percent
//!   (`host_time / device_time - 1`, as the paper reports it); then the same step
//!   with prioritized sampling (draw by priority, weighted loss, priority update) on
//!   each replay, and what it adds to the uniform step. Beside each, the ops one step
//!   dispatches (the step a GPU runs, counted on any device: [`shine_agent::aten`]).
//!
//! - k runs as one grouped step (`[trainer] grouped`) against their steps in turn; on
//!   CUDA also the graph step against the eager one, and the kernels of one captured
//!   step by name.
//!
//! Every step is the trainer's own ([`GroupStep`]: a run alone is a group of one).
//!
//! Run: `cargo run --release -p shine-manager --example replay_bench -- [flags]`.
//! Results and the machine they came from are in `docs/benchmarks.md`.

use crate::storage::replay::{DeviceReplay, HostReplay, Replay, ReplayConfig, ReplayKind, Sampling};
use crate::trainer::cuda_graph::{CudaGraph, GraphPool};
use crate::trainer::GroupStep;
use anyhow::Context;
use rand::{Rng, SeedableRng};
use shine_agent::dqn::{row, DqnConfig, Group, GroupOutput, Learner};
use shine_agent::experience::{col, TRANSITION_FLOATS};
use std::time::Instant;
use tch::{Device, Tensor};

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
    /// At the end, replay that graph once more between the profiler's start and stop
    /// (CUDA only): run under `ncu --profile-from-start off`, exactly one replay is
    /// profiled.
    #[arg(long)]
    pub profile_one_replay: bool,
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
            profile_one_replay: false,
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The trainer's step of `learners` (a group; one learner: a run alone), their replays
/// sampling by priority if `weighted`, replayed as a CUDA graph if `graph` (on CUDA).
fn stepper(learners: &mut [Learner], weighted: bool, graph: bool) -> anyhow::Result<GroupStep> {
    let mut members: Vec<&mut Learner> = learners.iter_mut().collect();
    GroupStep::new(&mut members, weighted, graph)
}

/// Microseconds per step of `s` (every run moves; `replays[r]` is run r's), `steps`
/// timed after `warmup`, each counted on the learners as the trainer counts it.
fn time_steps(s: &mut GroupStep, replays: &mut [&mut Replay], learners: &mut [Learner], warmup: usize, steps: usize) -> anyhow::Result<f64> {
    let device = s.group().shape().device;
    let moves = vec![true; replays.len()];
    let mut one = |s: &mut GroupStep, replays: &mut [&mut Replay]| -> anyhow::Result<GroupOutput> {
        let (out, _) = s.step(replays, &moves)?;
        for l in learners.iter_mut() {
            l.finish_step();
        }
        Ok(out)
    };
    for _ in 0..warmup {
        one(s, replays)?;
    }
    sync(device);
    let t = Instant::now();
    let mut last = None;
    for _ in 0..steps {
        last = Some(one(s, replays)?);
    }
    // Reading the last gradient norm waits for every queued step.
    let _ = last.map(|o| o.run(0).grad_norm.double_value(&[]));
    sync(device);
    Ok(t.elapsed().as_secs_f64() * 1e6 / steps as f64)
}

/// The ops one step of `s` dispatches (the draw and the grouped step; the optimizer and
/// prioritized sampling in the tensor form a GPU runs, also on the CPU), counted on any
/// device; the step is taken (and counted on `learners`).
fn ops_per_step(s: &mut GroupStep, replays: &mut [&mut Replay], learners: &mut [Learner]) -> anyhow::Result<usize> {
    let forms = |s: &mut GroupStep, replays: &mut [&mut Replay], host: bool| {
        s.group_mut().set_host_optimizer(host);
        for r in replays.iter_mut() {
            r.set_host_loops(host);
        }
    };
    forms(s, replays, false);
    let (out, ops) = shine_agent::aten::count_ops(|| s.device_work(replays))?;
    forms(s, replays, true);
    out?;
    for l in learners.iter_mut() {
        l.finish_step();
    }
    anyhow::ensure!(ops.syncs().is_empty(), "the step waits for the device: {:?}", ops.syncs());
    Ok(ops.counted().len())
}

/// A replay of `kind` and `sampling` holding `rows` random transitions.
fn filled_replay(kind: ReplayKind, sampling: Sampling, rows: usize, actions: usize, device: Device, seed: u64) -> anyhow::Result<Replay> {
    let cfg = ReplayConfig { kind, sampling, capacity: rows, update_size: 2000.min(rows), ..Default::default() };
    let mut r = Replay::new(&cfg, DqnConfig::default().gamma, device)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut left = rows;
    while left > 0 {
        let n = left.min(20_000);
        r.push(&random_rows(n, actions, &mut rng))?;
        left -= n;
    }
    r.flush();
    Ok(r)
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let device = crate::trainer::TrainerConfig { device: args.device.clone(), ..Default::default() }.device()?;
    if args.threads > 0 {
        tch::set_num_threads(args.threads as i32);
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    println!("device: {device:?}; libtorch threads: {}", tch::get_num_threads());
    let gamma_n = DqnConfig::default().gamma;

    // --- Figure 3: cost of adding one experience ---
    let max_update = args.update_sizes.iter().copied().max().unwrap_or(1);
    let adds = args.adds.max(2 * max_update);
    let rows = random_rows(adds, args.actions, &mut rng);
    let add_capacity = adds.next_multiple_of(max_update);
    let repeats = args.repeats.max(1);
    let mut host = HostReplay::new(add_capacity, gamma_n, device)?;
    let host_us = median((0..repeats).map(|_| add_cost(&mut |r| host.push(r, &[f32::NAN]).expect("one whole row"), &rows, device)).collect());
    drop(host);
    println!("\nAdding one experience ({adds} added one at a time, median of {repeats} runs; in-RAM replay: {host_us:.3} us)\n");
    println!("| update size | device replay (us / experience) | in-RAM replay (us / experience) |");
    println!("|---:|---:|---:|");
    for &u in &args.update_sizes {
        let mut dev = DeviceReplay::new(add_capacity, u, gamma_n, device).with_context(|| format!("update size {u}"))?;
        let us = median((0..repeats).map(|_| add_cost(&mut |r| dev.push(r, &[f32::NAN]).expect("one whole row"), &rows, device)).collect());
        println!("| {u} | {us:.3} | {host_us:.3} |");
    }

    // --- Table 1 / Figure 4: train step time, device replay vs in-RAM replay ---
    let cfg_for = |batch| DqnConfig { batch_size: batch, publish_average_tau: args.publish_average_tau, ..Default::default() };
    let fill = Instant::now();
    // Device, in-RAM, then both prioritized.
    let kinds = [ReplayKind::Device, ReplayKind::Host];
    let setups: Vec<(ReplayKind, Sampling)> = kinds.map(|k| (k, Sampling::Uniform)).into_iter().chain(kinds.map(|k| (k, Sampling::Prioritized))).collect();
    let mut replays = setups.iter().map(|&(kind, sampling)| filled_replay(kind, sampling, args.capacity, args.actions, device, 2)).collect::<anyhow::Result<Vec<_>>>()?;
    println!(
        "\nTrain step (sample + update) with {} experiences in each replay (filled in {:.1} s); median of {repeats} runs of {} steps after {} warm-up\n",
        args.capacity,
        fill.elapsed().as_secs_f64(),
        args.steps,
        args.warmup
    );
    println!("(ops / step: the ops one step dispatches, the draw included, counted on any device: each becomes one kernel or a few on a GPU)\n");
    println!(
        "| batch | device replay (ms / step) | in-RAM replay (ms / step) | speedup | device, prioritized | in-RAM, prioritized | prioritized adds (device) | ops / step, uniform | ops / step, prioritized |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &batch in &args.batches {
        let mut learners: Vec<Vec<Learner>> = Vec::new();
        let mut steps: Vec<GroupStep> = Vec::new();
        for &(_, sampling) in &setups {
            tch::manual_seed(3);
            let mut l = vec![Learner::new(&cfg_for(batch), args.actions, device)?];
            steps.push(stepper(&mut l, sampling == Sampling::Prioritized, false)?);
            learners.push(l);
        }
        let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for r in 0..repeats {
            for (i, s) in samples.iter_mut().enumerate() {
                let warmup = if r == 0 { args.warmup } else { 0 };
                s.push(time_steps(&mut steps[i], &mut [&mut replays[i]], &mut learners[i], warmup, args.steps)? / 1e3);
            }
        }
        let ops_uniform = ops_per_step(&mut steps[0], &mut [&mut replays[0]], &mut learners[0])?;
        let ops_prioritized = ops_per_step(&mut steps[2], &mut [&mut replays[2]], &mut learners[2])?;
        let [d, h, dp, hp] = samples.map(median);
        let speedup = (h / d - 1.0) * 100.0;
        let adds = (dp / d - 1.0) * 100.0;
        println!("| {batch} | {d:.3} | {h:.3} | {speedup:+.1} % | {dp:.3} | {hp:.3} | {adds:+.1} % | {ops_uniform} | {ops_prioritized} |");
    }

    // --- k runs as one grouped step, against their steps in turn ---
    let group_batch = args.graph_batches.first().copied().unwrap_or(32);
    let index = match device {
        Device::Cuda(i) => Some(i),
        _ => None,
    };
    if let Some(index) = index {
        for k in [1, 2, 4] {
            group_graph_equals_eager(index, k, group_batch)?;
            println!("\nGrouped step, k = {k}, batch {group_batch}: one CUDA graph replay gives what the eager step gives, over 20 steps (every output and tensor equal, bit for bit)");
        }
    }
    // Each run draws from a replay of its own (as on the manager), of at most 100,000 rows
    // (a draw costs the same from any number).
    let most = args.group_runs.iter().copied().max().unwrap_or(1);
    let own_rows = args.capacity.min(100_000);
    let mut own = (0..most).map(|r| filled_replay(ReplayKind::Device, Sampling::Uniform, own_rows, args.actions, device, 10 + r as u64)).collect::<anyhow::Result<Vec<_>>>()?;
    println!("\nk runs as one grouped step against k steps in turn (device replay, uniform, batch {group_batch}); median of {repeats} runs of {} steps", args.steps);
    println!("(run-steps/s: train steps of all k runs together per second)\n");
    println!("| k | in turn, eager (us / k steps) | grouped, eager (us) | grouped, graph (us) | run-steps / s, grouped | ops / grouped step | kernels / grouped step |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for &k in &args.group_runs {
        let (mut turns, mut eager, mut graphed) = (Vec::new(), Vec::new(), Vec::new());
        let (mut kernels, mut ops) = (None, 0);
        for r in 0..repeats {
            let warmup = if r == 0 { args.warmup } else { 0 };
            let mut learners = group_learners(k, &cfg_for(group_batch), args.actions, device)?;
            let mut t = 0.0;
            for (i, l) in learners.iter_mut().enumerate() {
                let mut alone = std::slice::from_mut(l);
                let mut s = stepper(alone, false, false)?;
                t += time_steps(&mut s, &mut [&mut own[i]], &mut alone, warmup, args.steps)?;
            }
            turns.push(t);
            let mut replays: Vec<&mut Replay> = own.iter_mut().take(k).collect();
            let mut s = stepper(&mut learners, false, false)?;
            eager.push(time_steps(&mut s, &mut replays, &mut learners, warmup, args.steps)?);
            ops = ops_per_step(&mut s, &mut replays, &mut learners)?;
            if index.is_some() {
                let mut s = stepper(&mut learners, false, true)?;
                graphed.push(time_steps(&mut s, &mut replays, &mut learners, crate::trainer::GRAPH_WARMUP_STEPS as usize + 1, args.steps)?);
                kernels = Some(s.graph().context("captured after the warm-up")?.count()?.1);
            }
        }
        let (turns, eager) = (median(turns), median(eager));
        let best = if graphed.is_empty() { eager } else { median(graphed.clone()) };
        let graph = if graphed.is_empty() { "-".to_string() } else { format!("{:.1}", median(graphed)) };
        let kernels = kernels.map_or("-".to_string(), |n| n.to_string());
        println!("| {k} | {turns:.1} | {eager:.1} | {graph} | {:.0} | {ops} | {kernels} |", k as f64 * 1e6 / best);
    }

    // --- The train step as one CUDA graph, against the launch limit ---
    let Some(index) = index else {
        println!("\nCUDA graph: needs a CUDA device (this run is on {device:?}): skipped");
        return Ok(());
    };
    let floor = kernel_floor_us(index)?;
    println!("\nThe train step (device replay, uniform) eager against one CUDA-graph replay; median of {repeats} runs of {} steps", args.steps);
    println!("(the launch floor: an empty kernel costs {floor:.2} us inside a graph)\n");
    println!("| batch | eager (us / step) | graph (us / step) | graph (steps / s) | ops / step | kernels / step | kernels x floor (us) | graph / floor |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let replay = &mut replays[0];
    for &batch in &args.graph_batches {
        let (mut e, mut g) = (Vec::new(), Vec::new());
        let (mut kernels, mut ops) = (0, 0);
        for r in 0..repeats {
            let warmup = if r == 0 { args.warmup } else { 0 };
            tch::manual_seed(3);
            let mut eager = vec![Learner::new(&cfg_for(batch), args.actions, device)?];
            let mut s = stepper(&mut eager, false, false)?;
            e.push(time_steps(&mut s, &mut [&mut *replay], &mut eager, warmup, args.steps)?);
            ops = ops_per_step(&mut s, &mut [&mut *replay], &mut eager)?;
            let mut graphed = vec![Learner::new(&cfg_for(batch), args.actions, device)?];
            let mut s = stepper(&mut graphed, false, true)?;
            g.push(time_steps(&mut s, &mut [&mut *replay], &mut graphed, crate::trainer::GRAPH_WARMUP_STEPS as usize + 1, args.steps)?);
            kernels = s.graph().context("captured after the warm-up")?.count()?.1;
        }
        let (e, g) = (median(e), median(g));
        let limit = kernels as f64 * floor;
        println!("| {batch} | {e:.1} | {g:.1} | {:.0} | {ops} | {kernels} | {limit:.1} | {:.2} |", 1e6 / g, g / limit);
    }
    // Where one step's time goes: the kernels it launches, by name.
    let mut learner = vec![Learner::new(&cfg_for(group_batch), args.actions, device)?];
    let mut s = stepper(&mut learner, false, true)?;
    time_steps(&mut s, &mut [&mut *replay], &mut learner, crate::trainer::GRAPH_WARMUP_STEPS as usize + 1, 1)?;
    let names = s.graph().context("captured after the warm-up")?.kernel_names(args.graph_dot.as_deref())?;
    println!("\nKernels of one captured train step (batch {group_batch}), by name: {} in all", names.len());
    if let Some(dot) = &args.graph_dot {
        println!("(the graph in Graphviz form: {})", dot.display());
    }
    println!("\n| count | kernel |");
    println!("|---:|---|");
    for (count, name) in crate::trainer::cuda_graph::kernel_counts(&names) {
        println!("| {count} | `{name}` |");
    }
    if args.profile_one_replay {
        // One replay between the profiler's start and stop: what `ncu --profile-from-start
        // off` (gpu-check.sh) times, kernel by kernel.
        crate::trainer::cuda_graph::profiler(true)?;
        time_steps(&mut s, &mut [&mut *replay], &mut learner, 0, 1)?;
        crate::trainer::cuda_graph::profiler(false)?;
        println!("\nOne replay of the graph above was profiled (the profiler on around it alone).");
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

/// The same 20 stacked batches through two groups of `k` learners of the same weights
/// on CUDA device `index`, one stepping eagerly, one replaying a captured graph of its
/// step (the batch read from one static tensor, refilled before each replay), with a
/// mask that holds the last run back every other step (with k > 1): every output of
/// every step and every learner's tensors afterwards are equal, bit for bit. On one
/// device a replay runs the kernels the eager step runs, on the same data (an H100 at
/// ec7fad3 showed every tensor equal), so that is the bound.
pub fn group_graph_equals_eager(index: usize, k: usize, batch: usize) -> anyhow::Result<()> {
    let device = Device::Cuda(index);
    let cfg = DqnConfig { batch_size: batch, target_sync_every: 7, ..Default::default() };
    tch::manual_seed(12);
    let mut eager = group_learners(k, &cfg, 5, device)?;
    tch::manual_seed(12);
    let mut graphed = group_learners(k, &cfg, 5, device)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
    let batches: Vec<Tensor> = (0..20)
        .map(|_| {
            let mut rows = Vec::new();
            row::from_wire(&random_rows(k * batch, 5, &mut rng), cfg.gamma as f32, &mut rows);
            Tensor::from_slice(&rows).view([k as i64, batch as i64, row::WIDTH as i64]).to_device(device)
        })
        .collect();
    let input = batches[0].copy();
    let (mut ge, mut gg) = {
        let (mut e, mut g): (Vec<&mut Learner>, Vec<&mut Learner>) = (eager.iter_mut().collect(), graphed.iter_mut().collect());
        (Group::new(&mut e, false)?, Group::new(&mut g, false)?)
    };
    let pool = GraphPool::new(index)?;
    let mut graph = CudaGraph::new()?;
    let mut out: Option<GroupOutput> = None;
    for (i, b) in batches.iter().enumerate() {
        let moves: Vec<bool> = (0..k).map(|r| r + 1 < k || k == 1 || i % 2 == 0).collect();
        ge.set_mask(&moves);
        gg.set_mask(&moves);
        let e = ge.device_step(b, None)?;
        if i < 3 {
            // Eager warm-up steps, as the trainer takes before its first capture.
            gg.device_step(b, None)?;
        } else {
            input.shallow_clone().copy_(b);
            if out.is_none() {
                out = Some(graph.capture(&pool, || gg.device_step(&input, None))??);
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
                let (a, b) = (e.run(r), o.run(r));
                for (what, x, y) in [("loss", a.loss(), b.loss()), ("mean Q", a.mean_q(), b.mean_q()), ("gradient norm", a.grad_norm.shallow_clone(), b.grad_norm.shallow_clone())] {
                    anyhow::ensure!(x.equal(&y), "k {k}, step {i}, run {r}: {what}: eager {}, graph {}", x.double_value(&[]), y.double_value(&[]));
                }
            }
        }
    }
    for (a, b) in eager.iter().zip(&graphed) {
        anyhow::ensure!(a.step == b.step && a.optimizer_steps() == b.optimizer_steps(), "the step counts differ");
        for (x, y) in a.state_tensors().iter().zip(b.state_tensors()) {
            anyhow::ensure!(x.1.equal(&y.1), "k {k}: {} differs between the eager and the graph step", x.0);
        }
    }
    Ok(())
}

/// What an empty kernel costs inside a graph on CUDA device `index` (microseconds):
/// 200 one-element adds captured, replayed 50 times.
fn kernel_floor_us(index: usize) -> anyhow::Result<f64> {
    let device = Device::Cuda(index);
    let mut x = tch::Tensor::zeros([1], (tch::Kind::Float, device));
    let mut graph = CudaGraph::new()?;
    graph.capture(&GraphPool::new(index)?, || {
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
            profile_one_replay: false,
        };
        run(args).unwrap();
    }

    /// On a GPU: the graph step equals the eager one (replay_bench runs the same check
    /// on CUDA, before its grouped table).
    #[test]
    #[ignore = "needs a CUDA device: scripts/gpu-check.sh runs replay_bench, which checks this"]
    fn graph_step_equals_the_eager_step_over_20_steps() {
        assert!(tch::Cuda::is_available(), "this test needs a CUDA device");
        for k in [1, 2] {
            group_graph_equals_eager(0, k, 32).unwrap();
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
