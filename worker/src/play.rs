//! `shine-worker play` and `shine-worker eval`: watch a policy play, and measure it.
//!
//! Both run whole episodes on the embedded simulator against the scripted CPU and
//! report full-minute survival with a 95 % (Wilson) interval. Episode `i` uses seed
//! `seed + i`, so a run is reproducible and two policies can be compared on the very
//! same matches.

use crate::backend::{Backend, DolphinSetup};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use shine_agent::actions::ActionSet;
use shine_agent::model::QNet;
use shine_agent::policy::{Dodge, Greedy, Idle, Policy, RandomPolicy};
use shine_agent::stats::Survival;
use shine_agent::task::{EpisodeEnd, Task};
use shine_agent::Env;
use shine_bridge::sim::Sim;
use shine_bridge::{Emulator, MatchSetup};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyKind {
    /// Never press anything.
    Idle,
    /// Uniformly random macro-actions.
    Random,
    /// Hand-written heuristic: spot dodge when the CPU attacks in reach.
    Dodge,
}

#[derive(Debug, Clone, Args)]
pub struct PlayArgs {
    /// Where the game runs.
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: Backend,
    /// A trained model file (safetensors, as downloaded from the dashboard); plays it greedily.
    #[arg(long, conflicts_with = "policy")]
    pub model: Option<PathBuf>,
    /// A built-in policy, when no --model is given.
    #[arg(long, value_enum, default_value = "dodge")]
    pub policy: PolicyKind,
    /// CPU opponent level, 1 to 9.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub cpu_level: u8,
    /// Episodes to play (one minute each at most).
    #[arg(long, default_value_t = 10)]
    pub episodes: u32,
    /// Seed of the first episode; episode i uses seed + i.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Only print the summary.
    #[arg(long)]
    pub quiet: bool,
    /// With --backend dolphin: your Melee NTSC 1.02 disc image (Shine cannot ship it).
    #[arg(long)]
    pub iso: Option<PathBuf>,
    /// With --backend dolphin: the dolphin-emu-nogui to run (default: found on PATH or in /usr/games).
    #[arg(long)]
    pub dolphin: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The model file to evaluate.
    #[arg(long)]
    pub model: PathBuf,
    /// Episodes to play; 200 gives an interval of about +/- 6 points.
    #[arg(long, default_value_t = 200)]
    pub episodes: u32,
    /// CPU opponent level, 1 to 9 (the paper evaluates at 9).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub cpu_level: u8,
    /// Seed of the first episode.
    #[arg(long, default_value_t = 1_000_000)]
    pub seed: u64,
}

/// One finished episode.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeResult {
    pub frames: u32,
    pub end: EpisodeEnd,
    pub reward: f32,
}

impl EpisodeResult {
    pub fn survived(&self) -> bool {
        self.end == EpisodeEnd::TimeLimit
    }
}

/// Which policy to build (policies hold buffers, so each thread builds its own).
#[derive(Clone)]
pub enum PolicySpec {
    Builtin(PolicyKind),
    Model(Box<QNet>),
}

impl PolicySpec {
    fn action_set(&self) -> anyhow::Result<ActionSet> {
        match self {
            PolicySpec::Builtin(_) => Ok(ActionSet::Untouchable),
            PolicySpec::Model(net) => {
                let set = ActionSet::from_name(&net.meta().action_set)
                    .with_context(|| format!("the model's action set {:?} is unknown to this worker", net.meta().action_set))?;
                if set.len() != net.action_count() {
                    bail!("the model has {} actions but the {set} set has {}", net.action_count(), set.len());
                }
                Ok(set)
            }
        }
    }

    fn build(&self, set: ActionSet) -> Box<dyn Policy> {
        match self {
            PolicySpec::Builtin(PolicyKind::Idle) => Box::new(Idle),
            PolicySpec::Builtin(PolicyKind::Random) => Box::new(RandomPolicy(set)),
            PolicySpec::Builtin(PolicyKind::Dodge) => Box::new(Dodge),
            PolicySpec::Model(net) => Box::new(Greedy::new(QNet::clone(net))),
        }
    }
}

/// Play one Untouchable episode on the simulator.
pub fn play_episode(policy: &mut dyn Policy, set: ActionSet, cpu_level: u8, seed: u64) -> anyhow::Result<EpisodeResult> {
    let setup = MatchSetup { cpu_level, ..MatchSetup::default() };
    let mut env = Env::new(Sim::new(setup, seed), setup, Task::Untouchable, set);
    run_episode(&mut env, policy, cpu_level, seed)
}

/// Play one episode on any backend's environment (reset, then macro-actions until it ends).
pub fn run_episode<E: Emulator>(env: &mut Env<E>, policy: &mut dyn Policy, cpu_level: u8, seed: u64) -> anyhow::Result<EpisodeResult> {
    let mut obs = env.reset(cpu_level, seed)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0005_eed0_fb07);
    loop {
        let a = policy.act(&obs, &mut rng);
        let step = env.step(a)?;
        obs = step.next;
        if let Some(end) = step.end {
            let ep = env.episode().expect("episode after reset");
            return Ok(EpisodeResult { frames: ep.frames(), end, reward: ep.total_reward });
        }
    }
}

/// Play `episodes` episodes (seeds `seed..seed+episodes`) on all cores; results in
/// seed order.
pub fn play_many(spec: &PolicySpec, cpu_level: u8, episodes: u32, seed: u64) -> anyhow::Result<Vec<EpisodeResult>> {
    let set = spec.action_set()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(episodes.max(1) as usize);
    let results: Vec<anyhow::Result<Vec<(u32, EpisodeResult)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut policy = spec.build(set);
                    (t as u32..episodes)
                        .step_by(threads)
                        .map(|i| Ok((i, play_episode(policy.as_mut(), set, cpu_level, seed.wrapping_add(i as u64))?)))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("episode thread panicked")).collect()
    });
    let mut all = Vec::with_capacity(episodes as usize);
    for r in results {
        all.extend(r?);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, r)| r).collect())
}

fn load_model(path: &PathBuf) -> anyhow::Result<QNet> {
    let bytes = std::fs::read(path).with_context(|| format!("reading the model file {}", path.display()))?;
    QNet::load(&bytes).with_context(|| format!("{} is not a Shine model file", path.display()))
}

fn summarize(results: &[EpisodeResult]) -> Survival {
    let mut s = Survival::default();
    for r in results {
        s.add(r.survived(), r.frames);
    }
    s
}

pub fn play(args: PlayArgs) -> anyhow::Result<()> {
    let (spec, label) = match &args.model {
        Some(path) => {
            let net = load_model(path)?;
            let label = format!("model v{} ({})", net.meta().model_version, path.display());
            (PolicySpec::Model(Box::new(net)), label)
        }
        None => (PolicySpec::Builtin(args.policy), format!("policy {:?}", args.policy).to_lowercase()),
    };
    let results = match args.backend {
        Backend::Sim => {
            eprintln!("playing {} episodes of {label} against the level-{} CPU on the simulator", args.episodes, args.cpu_level);
            play_many(&spec, args.cpu_level, args.episodes, args.seed)?
        }
        Backend::Dolphin => {
            eprintln!("playing {} episodes of {label} against the level-{} CPU in Dolphin", args.episodes, args.cpu_level);
            play_dolphin(&spec, &args)?
        }
    };
    if !args.quiet {
        for (i, r) in results.iter().enumerate() {
            let what = match r.end {
                EpisodeEnd::TimeLimit => "survived the full minute".to_string(),
                EpisodeEnd::Hit => format!("hit after {} frames", r.frames),
                EpisodeEnd::StockLost => format!("lost a stock after {} frames", r.frames),
                EpisodeEnd::GameOver => format!("game over after {} frames", r.frames),
            };
            println!("episode {:>4} (seed {}): {what}, reward {:.2}", i + 1, args.seed + i as u64, r.reward);
        }
    }
    println!("{label}, CPU level {}: {}", args.cpu_level, summarize(&results));
    Ok(())
}

pub fn eval(args: EvalArgs) -> anyhow::Result<()> {
    let net = load_model(&args.model)?;
    let version = net.meta().model_version;
    eprintln!("evaluating model v{version} greedily over {} episodes at CPU level {}", args.episodes, args.cpu_level);
    let results = play_many(&PolicySpec::Model(Box::new(net)), args.cpu_level, args.episodes, args.seed)?;
    println!("model v{version}, CPU level {}: {}", args.cpu_level, summarize(&results));
    Ok(())
}

// ---- The Dolphin backend (docs/dolphin.md) -------------------------------------------

/// Play the episodes in one Dolphin, one after the other (a match per episode: the
/// backend's reset quits the last one and goes through the menus).
fn play_dolphin(spec: &PolicySpec, args: &PlayArgs) -> anyhow::Result<Vec<EpisodeResult>> {
    let dolphin = DolphinSetup::check(args.iso.as_deref(), args.dolphin.as_deref())?;
    let set = spec.action_set()?;
    let setup = MatchSetup { cpu_level: args.cpu_level, ..MatchSetup::default() };
    let emu = dolphin.launch(setup)?;
    let mut env = Env::new(emu, setup, Task::Untouchable, set);
    let mut policy = spec.build(set);
    let mut results = Vec::with_capacity(args.episodes as usize);
    for i in 0..args.episodes {
        results.push(run_episode(&mut env, policy.as_mut(), args.cpu_level, args.seed.wrapping_add(i as u64))?);
    }
    let stats = env.emulator().stats();
    // Skipped frames ran on a stale pad: the paper's agent suffered from them unseen.
    eprintln!(
        "dolphin: {} frames, {} skipped ({:.2} %), {} launch(es)",
        stats.ticks,
        stats.skipped,
        100.0 * stats.skipped as f64 / stats.ticks.max(1) as f64,
        stats.launches
    );
    Ok(results)
}
