//! The worker's match engine: episodes on the simulator, the bot against the scripted
//! CPU or a policy on the other side ([`Matches`]), as `play`, `eval` and the league's
//! matches play them; the same episode loop on any backend ([`run_episode`]).
//!
//! The bot's policy decides through `shine_agent::Env` (its seat), a rival sits in the
//! [`Duel`]'s seat of its own; each has a random stream tied to its fighter
//! ([`stream`]), so two models' match is the same match whichever is called the bot.

use crate::games::duel::{Duel, Rival};
use anyhow::{bail, Context};
use clap::ValueEnum;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use shine_agent::actions::ActionSet;
use shine_agent::model::QNet;
use shine_agent::policy::{Dodge, EpsilonGreedy, Greedy, Idle, Policy, RandomPolicy};
use shine_agent::task::{EpisodeEnd, Tally, Task};
use shine_agent::{Env, Side};
use shine_bridge::{Emulator, MatchSetup};
use std::sync::Arc;

/// A built-in policy (`--policy`, `--opponent policy:NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyKind {
    /// Never press anything.
    Idle,
    /// Uniformly random macro-actions.
    Random,
    /// Hand-written heuristic: spot dodge when the CPU attacks in reach (Untouchable
    /// task only).
    Dodge,
    /// The simulator's own scripted CPU plays the bot's side, at --bot-level (the
    /// simulator only).
    Cpu,
}

/// One finished episode.
#[derive(Debug, Clone, Copy)]
pub struct EpisodeResult {
    pub frames: u32,
    pub end: EpisodeEnd,
    pub reward: f32,
    /// Stocks and damage, both ways.
    pub tally: Tally,
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
    /// The fighter a policy plays unless told otherwise: a model's own; Fox for the
    /// built-in policies.
    pub fn side(&self) -> Side {
        match self {
            PolicySpec::Model(net) => net.meta().side,
            PolicySpec::Builtin(_) => Side::Fox,
        }
    }

    /// The side asked for, or the policy's own; a model only plays the side it was
    /// trained for.
    pub fn resolve_side(&self, asked: Option<Side>) -> anyhow::Result<Side> {
        let own = self.side();
        match (self, asked) {
            (PolicySpec::Model(_), Some(side)) if side != own => {
                bail!("the model plays {own} (its file says so); it cannot play --side {side}: pass a model trained for {side}, or leave --side out")
            }
            (_, asked) => Ok(asked.unwrap_or(own)),
        }
    }

    /// The task a policy plays unless told otherwise: a fight model's is the fight.
    pub fn default_task(&self) -> Task {
        match self {
            PolicySpec::Model(net) if net.meta().action_set == ActionSet::Fight.name() => Task::Fight,
            _ => Task::Untouchable,
        }
    }

    /// The macro-actions the policy chooses among: a model's own; for the built-in
    /// policies, the task's set.
    pub fn action_set(&self, task: Task) -> anyhow::Result<ActionSet> {
        match self {
            PolicySpec::Builtin(PolicyKind::Dodge) if task == Task::Fight => {
                bail!("--policy dodge plays the untouchable task only (its dodge is that action set's); use idle, random or cpu for the fight")
            }
            PolicySpec::Builtin(_) => Ok(match task {
                Task::Untouchable => ActionSet::Untouchable,
                Task::Fight => ActionSet::Fight,
            }),
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

    /// The policy that plays: a model greedily, or with probability `epsilon` a random
    /// macro-action (built-in policies ignore `epsilon`).
    pub fn build(&self, set: ActionSet, epsilon: f64) -> Box<dyn Policy> {
        match self {
            // The CPU's pads replace the bot's in the simulator; the bot idles.
            PolicySpec::Builtin(PolicyKind::Idle | PolicyKind::Cpu) => Box::new(Idle),
            PolicySpec::Builtin(PolicyKind::Random) => Box::new(RandomPolicy(set)),
            PolicySpec::Builtin(PolicyKind::Dodge) => Box::new(Dodge),
            PolicySpec::Model(net) if epsilon > 0.0 => Box::new(EpsilonGreedy::new(Arc::new(QNet::clone(net)), epsilon)),
            PolicySpec::Model(net) => Box::new(Greedy::new(QNet::clone(net))),
        }
    }
}

/// A policy on the other side of the bot, as the matches' terms name it (each thread
/// seats its own [`Rival`] built from it).
#[derive(Clone)]
pub struct RivalSpec {
    pub spec: PolicySpec,
    pub actions: ActionSet,
    /// Its model's version (0 for a built-in policy).
    pub version: u64,
    /// How reports name it, e.g. "model v7 (marth)".
    pub label: String,
}

impl RivalSpec {
    /// The rival to seat, a model exploring at `epsilon`.
    pub fn build(&self, epsilon: f64) -> Rival {
        Rival { policy: self.spec.build(self.actions, epsilon), actions: self.actions, model_version: self.version }
    }
}

/// How the episodes of a `play` or `eval` are played.
#[derive(Clone)]
pub struct Matches {
    pub task: Task,
    /// The fighter the bot plays.
    pub side: Side,
    /// The opponent's level when the scripted CPU is the opponent.
    pub cpu_level: u8,
    /// `Some`: this policy plays the other side instead of the scripted CPU.
    pub rival: Option<RivalSpec>,
    /// `Some(level)`: the simulator's CPU plays the bot's side at that level.
    pub bot_cpu: Option<u8>,
    pub episodes: u32,
    /// Episode `i` uses seed `seed + i`.
    pub seed: u64,
    /// The chance that a model, the bot's or the rival's, takes a random macro-action
    /// instead of its greedy one (0: greedy).
    pub epsilon: f64,
}

impl Matches {
    /// Who the bot plays against, as reports say it.
    pub fn opponent_label(&self) -> String {
        let opponent = match &self.rival {
            None => format!("CPU level {}", self.cpu_level),
            Some(r) => format!("against {}", r.label),
        };
        if self.epsilon > 0.0 {
            format!("{opponent}, epsilon {}", self.epsilon)
        } else {
            opponent
        }
    }
}

/// The chance each model takes a random macro-action when a model plays a model (the
/// default of `play` and `eval` with `--opponent model:FILE`, and the league's matches
/// between two models). The simulator's only randomness is the scripted CPU's: two
/// greedy models play one match over and over, whatever the seed. 0.05 is the
/// evaluation epsilon of the DQN paper (Mnih et al., 2015).
pub const MODEL_VS_MODEL_EPSILON: f64 = 0.05;

/// `--epsilon` as asked, or its default: [`MODEL_VS_MODEL_EPSILON`] when both sides are
/// models, else 0 (against the CPU the matches differ by its randomness).
pub fn resolve_epsilon(asked: Option<f64>, bot: &PolicySpec, rival: Option<&RivalSpec>) -> f64 {
    let both_models = matches!(bot, PolicySpec::Model(_)) && matches!(rival.map(|r| &r.spec), Some(PolicySpec::Model(_)));
    asked.unwrap_or(if both_models { MODEL_VS_MODEL_EPSILON } else { 0.0 })
}

/// Seed offsets of the random streams of the policies playing Fox and Marth (a random
/// policy's moves, a model's random actions under `--epsilon`). Tied to the fighter,
/// not to who is the bot, so two models' match is the same match whichever of them
/// `eval` is given as the bot.
const FOX_STREAM: u64 = 0x0005_eed0_fb07;
const MARTH_STREAM: u64 = 0x0e11_0b07;

pub fn stream(side: Side) -> u64 {
    match side {
        Side::Fox => FOX_STREAM,
        Side::Marth => MARTH_STREAM,
    }
}

/// Play one episode on the simulator.
pub fn play_episode(policy: &mut dyn Policy, set: ActionSet, m: &Matches, seed: u64) -> anyhow::Result<EpisodeResult> {
    let view = MatchSetup { cpu_level: m.cpu_level, ..m.side.view(MatchSetup::default()) };
    let mut duel = Duel::new(m.side, view, m.task, seed);
    if let Some(level) = m.bot_cpu {
        duel = duel.with_bot_cpu(level);
    }
    if let Some(r) = &m.rival {
        duel.seat(Some(r.build(m.epsilon)), seed ^ stream(m.side.other()), false);
    }
    let mut env = Env::new(duel, view, m.task, set);
    run_episode(&mut env, policy, m.cpu_level, seed, seed ^ stream(m.side))
}

/// Play one episode on any backend's environment (reset, then macro-actions until it ends).
/// `policy_seed` seeds the policy's random stream.
pub fn run_episode<E: Emulator>(env: &mut Env<E>, policy: &mut dyn Policy, cpu_level: u8, seed: u64, policy_seed: u64) -> anyhow::Result<EpisodeResult> {
    let mut obs = env.reset(cpu_level, seed)?;
    let mut rng = ChaCha8Rng::seed_from_u64(policy_seed);
    loop {
        let a = policy.act(&obs, &mut rng);
        let step = env.step(a)?;
        obs = step.next;
        if let Some(end) = step.end {
            let ep = env.episode().expect("episode after reset");
            return Ok(EpisodeResult { frames: ep.frames(), end, reward: ep.total_reward, tally: ep.tally() });
        }
    }
}

/// Play the episodes `m` describes (seeds `seed..seed+episodes`) on all cores; results
/// in seed order.
pub fn play_many(spec: &PolicySpec, m: &Matches) -> anyhow::Result<Vec<EpisodeResult>> {
    let set = spec.action_set(m.task)?;
    let (episodes, seed) = (m.episodes, m.seed);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(episodes.max(1) as usize);
    let results: Vec<anyhow::Result<Vec<(u32, EpisodeResult)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut policy = spec.build(set, m.epsilon);
                    (t as u32..episodes).step_by(threads).map(|i| Ok((i, play_episode(policy.as_mut(), set, m, seed.wrapping_add(i as u64))?))).collect()
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
