//! `shine-worker play` and `shine-worker eval`: watch a policy play, and measure it.
//!
//! Both run whole episodes on the embedded simulator against the scripted CPU, or a
//! model or built-in policy on the other side ([`Matches::rival`]; two models each take
//! a random action now and then, [`MODEL_VS_MODEL_EPSILON`]); `play` also in Dolphin,
//! against Melee's CPU, a second bot on the opponent's port, or a person. For the
//! Untouchable task they report full-minute survival with a 95 % (Wilson)
//! interval; for the fight task, matches won (Wilson interval too), drawn and lost, and
//! stocks and damage per match with 95 % intervals ([`FightSummary`]). Episode `i` uses
//! seed `seed + i`, so a run is reproducible and two policies can be compared on the
//! very same matches.
//!
//! Here: the commands, the policies and the matches on the simulator; the arguments
//! in `args` (the matches' terms once for both commands), the figures in `summary`,
//! the Dolphin paths in `dolphin`.

mod args;
mod dolphin;
mod summary;

pub use args::{EvalArgs, MatchArgs, ModelSource, OpponentArg, PlayArgs, PolicyKind, SideArg, TaskArg};
pub use summary::{EpisodeResult, FightSummary, Mean};

use crate::games::backend::Backend;
use crate::games::duel::{Duel, Opponent};
use anyhow::{bail, Context};
use dolphin::{play_against_person, play_dolphin};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use shine_agent::actions::ActionSet;
use shine_agent::model::QNet;
use shine_agent::policy::{Dodge, EpsilonGreedy, Greedy, Idle, Policy, RandomPolicy};
use shine_agent::task::{EpisodeEnd, Task};
use shine_agent::{Env, Side};
use shine_bridge::{Emulator, MatchSetup};
use std::sync::Arc;
use summary::summarize;

/// Which policy to build (policies hold buffers, so each thread builds its own).
#[derive(Clone)]
pub enum PolicySpec {
    Builtin(PolicyKind),
    Model(Box<QNet>),
}

impl PolicySpec {
    /// The fighter a policy plays unless told otherwise: a model's own; Fox for the
    /// built-in policies.
    fn side(&self) -> Side {
        match self {
            PolicySpec::Model(net) => net.meta().side,
            PolicySpec::Builtin(_) => Side::Fox,
        }
    }

    /// The side asked for, or the policy's own; a model only plays the side it was
    /// trained for.
    fn resolve_side(&self, asked: Option<SideArg>) -> anyhow::Result<Side> {
        let own = self.side();
        match (self, asked.map(Side::from)) {
            (PolicySpec::Model(_), Some(side)) if side != own => {
                bail!("the model plays {own} (its file says so); it cannot play --side {side}: pass a model trained for {side}, or leave --side out")
            }
            (_, asked) => Ok(asked.unwrap_or(own)),
        }
    }

    /// The task a policy plays unless told otherwise: a fight model's is the fight.
    fn default_task(&self) -> Task {
        match self {
            PolicySpec::Model(net) if net.meta().action_set == ActionSet::Fight.name() => Task::Fight,
            _ => Task::Untouchable,
        }
    }

    /// The macro-actions the policy chooses among: a model's own; for the built-in
    /// policies, the task's set.
    fn action_set(&self, task: Task) -> anyhow::Result<ActionSet> {
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
    pub(crate) fn build(&self, set: ActionSet, epsilon: f64) -> Box<dyn Policy> {
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

/// A policy on the other side of the bot.
#[derive(Clone)]
pub struct Rival {
    pub spec: PolicySpec,
    pub actions: ActionSet,
    /// Its model's version (0 for a built-in policy).
    pub version: u64,
    /// How reports name it, e.g. "model v7 (marth)".
    pub label: String,
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
    pub rival: Option<Rival>,
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
    fn opponent_label(&self) -> String {
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
pub(crate) fn resolve_epsilon(asked: Option<f64>, bot: &PolicySpec, rival: Option<&Rival>) -> f64 {
    let both_models = matches!(bot, PolicySpec::Model(_)) && matches!(rival.map(|r| &r.spec), Some(PolicySpec::Model(_)));
    asked.unwrap_or(if both_models { MODEL_VS_MODEL_EPSILON } else { 0.0 })
}

/// Seed offsets of the random streams of the policies playing Fox and Marth (a random
/// policy's moves, a model's random actions under `--epsilon`). Tied to the fighter,
/// not to who is the bot, so two models' match is the same match whichever of them
/// `eval` is given as the bot.
const FOX_STREAM: u64 = 0x0005_eed0_fb07;
const MARTH_STREAM: u64 = 0x0e11_0b07;

fn stream(side: Side) -> u64 {
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
        let policy = r.spec.build(r.actions, m.epsilon);
        duel.seat(Opponent::Policy { policy, actions: r.actions, model_version: r.version }, seed ^ stream(m.side.other()), false);
    }
    let mut env = Env::new(duel, view, m.task, set);
    run_episode(&mut env, policy, m.cpu_level, seed, seed ^ stream(m.side))
}

/// `--opponent` (or `--cpu-level`) made into the matches' opponent: the CPU's level,
/// or a rival policy, checked against the bot's side and action set.
fn resolve_opponent(
    arg: Option<&OpponentArg>,
    token: Option<&str>,
    cpu_level: u8,
    side: Side,
    task: Task,
    set: ActionSet,
) -> anyhow::Result<(u8, Option<Rival>)> {
    let theirs = side.other();
    match arg {
        None => Ok((cpu_level, None)),
        Some(OpponentArg::Cpu(level)) => Ok((*level, None)),
        Some(OpponentArg::Model(path)) => {
            let net = load_model(path, token).context("--opponent model:FILE")?;
            let meta = net.meta().clone();
            if meta.side != theirs {
                bail!(
                    "the opponent model {path} plays {}, the bot's own side: against a {side} bot the opponent plays {theirs}; pass a model trained for {theirs}",
                    meta.side
                );
            }
            let spec = PolicySpec::Model(Box::new(net));
            let actions = spec.action_set(task)?;
            if actions != set {
                bail!(
                    "the opponent model {path} chooses among the {actions} action set, the bot among the {set} set: both sides must play the same action set"
                );
            }
            let label = format!("model v{} ({theirs})", meta.model_version);
            Ok((cpu_level, Some(Rival { spec, actions, version: meta.model_version, label })))
        }
        Some(OpponentArg::Policy(kind)) => {
            let spec = PolicySpec::Builtin(*kind);
            let actions = spec.action_set(task).context("--opponent policy:NAME")?;
            Ok((cpu_level, Some(Rival { spec, actions, version: 0, label: format!("policy {kind:?}").to_lowercase() })))
        }
    }
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

/// A model from its file or its address (`token` for a manager whose reads are private).
fn load_model(src: &ModelSource, token: Option<&str>) -> anyhow::Result<QNet> {
    let bytes = match src {
        ModelSource::File(path) => std::fs::read(path).with_context(|| format!("reading the model file {}", path.display()))?,
        ModelSource::Url(url) => crate::client::download(url, token).with_context(|| format!("downloading the model from {url}"))?,
    };
    QNet::load(&bytes).with_context(|| format!("{src} is not a Shine model file"))
}

/// The summary line of `play` and `eval`: who played (and as which fighter, when not
/// Fox), the task (named when it is the fight), the opponent and the task's figures.
fn report(label: &str, m: &Matches, results: &[EpisodeResult]) -> String {
    let who = match m.side {
        Side::Fox => label.to_string(),
        side => format!("{label} as {side}"),
    };
    let opponent = m.opponent_label();
    match m.task {
        Task::Untouchable => format!("{who}, {opponent}: {}", summarize(results)),
        Task::Fight => format!("{who}, fight, {opponent}: {}", FightSummary::of(results)),
    }
}

pub fn play(args: PlayArgs) -> anyhow::Result<()> {
    let (spec, label) = match &args.model {
        Some(src) => {
            let net = load_model(src, args.token.as_deref())?;
            let label = format!("model v{} ({src})", net.meta().model_version);
            (PolicySpec::Model(Box::new(net)), label)
        }
        None if args.policy == PolicyKind::Cpu => (PolicySpec::Builtin(args.policy), format!("the level-{} CPU in the bot's place", args.bot_level)),
        None => (PolicySpec::Builtin(args.policy), format!("policy {:?}", args.policy).to_lowercase()),
    };
    let task = args.terms.task.map_or_else(|| spec.default_task(), Task::from);
    let bot_cpu = (args.model.is_none() && args.policy == PolicyKind::Cpu).then_some(args.bot_level);
    if args.human_port.is_some() && (args.terms.opponent.is_some() || args.terms.epsilon.is_some()) {
        bail!("--opponent and --epsilon do not go with --human-port: against a person the bot plays greedily, and the person is the opponent");
    }
    // The side first, for a person too: a model plays the fighter it was trained as.
    let side = spec.resolve_side(args.terms.side)?;
    if let Some(human_port) = args.human_port {
        return play_against_person(&spec, &args, task, side, human_port, bot_cpu.is_some());
    }
    if args.backend == Backend::Dolphin && side != Side::Fox {
        bail!("in Dolphin the bot plays Fox (so far), and this one plays {side}: a {side} model plays there as the opponent, --opponent model:FILE beside a Fox --model");
    }
    let (cpu_level, rival) = resolve_opponent(args.terms.opponent.as_ref(), args.token.as_deref(), args.terms.cpu_level, side, task, spec.action_set(task)?)?;
    let epsilon = resolve_epsilon(args.terms.epsilon, &spec, rival.as_ref());
    let m = Matches { task, side, cpu_level, rival, bot_cpu, episodes: args.episodes, seed: args.seed, epsilon };
    match args.backend {
        Backend::Sim => {
            let as_side = if side == Side::Fox { String::new() } else { format!(" as {side}") };
            eprintln!("playing {} episodes ({}) of {label}{as_side}, {} on the simulator", args.episodes, task.name(), m.opponent_label());
            let results = play_many(&spec, &m)?;
            print_episodes(&args, &m, &results);
            println!("{}", report(&label, &m, &results));
            Ok(())
        }
        Backend::Dolphin if bot_cpu.is_some() => {
            bail!("--policy cpu runs on the simulator only (in Dolphin, Melee's own CPU would need a controller port of its own)")
        }
        Backend::Dolphin => {
            let against = match &m.rival {
                None => format!("the level-{} CPU", m.cpu_level),
                Some(r) => format!("{} on the opponent's port", r.label),
            };
            eprintln!("playing {} episodes ({}) of {label} against {against} in Dolphin", args.episodes, task.name());
            play_dolphin(&spec, &args, &m, &label)
        }
    }
}

/// The line of each episode played, unless `--quiet`.
fn print_episodes(args: &PlayArgs, m: &Matches, results: &[EpisodeResult]) {
    if args.quiet {
        return;
    }
    for (i, r) in results.iter().enumerate() {
        let what = match r.end {
            EpisodeEnd::TimeLimit => "survived the full minute".to_string(),
            EpisodeEnd::Hit => format!("hit after {} frames", r.frames),
            EpisodeEnd::StockLost => format!("lost a stock after {} frames", r.frames),
            EpisodeEnd::GameOver => format!("game over after {} frames", r.frames),
        };
        let t = r.tally;
        let fight = match m.task {
            Task::Fight => {
                format!(", {:?}: stocks {}-{}, damage {:.0}-{:.0} %", t.outcome(), t.stocks_taken, t.stocks_lost, t.damage_dealt, t.damage_taken).to_lowercase()
            }
            Task::Untouchable => String::new(),
        };
        println!("episode {:>4} (seed {}): {what}, reward {:.2}{fight}", i + 1, args.seed + i as u64, r.reward);
    }
}

pub fn eval(args: EvalArgs) -> anyhow::Result<()> {
    let net = load_model(&args.model, args.token.as_deref())?;
    let version = net.meta().model_version;
    let spec = PolicySpec::Model(Box::new(net));
    let task = args.terms.task.map_or_else(|| spec.default_task(), Task::from);
    let side = spec.resolve_side(args.terms.side)?;
    let (cpu_level, rival) = resolve_opponent(args.terms.opponent.as_ref(), args.token.as_deref(), args.terms.cpu_level, side, task, spec.action_set(task)?)?;
    let epsilon = resolve_epsilon(args.terms.epsilon, &spec, rival.as_ref());
    let m = Matches { task, side, cpu_level, rival, bot_cpu: None, episodes: args.episodes, seed: args.seed, epsilon };
    let how = if epsilon > 0.0 { format!("epsilon-greedily ({epsilon})") } else { "greedily".to_string() };
    eprintln!("evaluating model v{version} ({side}) {how} over {} episodes ({}), {}", args.episodes, task.name(), m.opponent_label());
    let results = play_many(&spec, &m)?;
    println!("{}", report(&format!("model v{version}"), &m, &results));
    Ok(())
}
