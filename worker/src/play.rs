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

use crate::games::backend::{Backend, DolphinSetup};
use crate::games::duel::{Duel, DolphinDuel, Opponent};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use shine_agent::actions::ActionSet;
use shine_agent::model::QNet;
use shine_agent::policy::{Dodge, EpsilonGreedy, Greedy, Idle, Policy, RandomPolicy};
use shine_agent::stats::{wilson95, Survival};
use shine_agent::task::{EpisodeEnd, Outcome, Tally, Task};
use shine_agent::{Env, Side};
use shine_bridge::{Emulator, MatchSetup};
use std::path::PathBuf;
use std::sync::Arc;

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

/// `--task`: what is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TaskArg {
    /// Survive the minute without a hit (the paper's task): survival is reported.
    Untouchable,
    /// Fight for the minute: wins, stocks and damage are reported.
    Fight,
}

impl From<TaskArg> for Task {
    fn from(t: TaskArg) -> Task {
        match t {
            TaskArg::Untouchable => Task::Untouchable,
            TaskArg::Fight => Task::Fight,
        }
    }
}

/// `--side`: the fighter the bot plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SideArg {
    /// The side the paper's agent plays (the simulator's port 2).
    Fox,
    /// The simulator's opponent side (port 1).
    Marth,
}

impl From<SideArg> for Side {
    fn from(s: SideArg) -> Side {
        match s {
            SideArg::Fox => Side::Fox,
            SideArg::Marth => Side::Marth,
        }
    }
}

/// `--opponent`: who plays the other side, on the simulator.
#[derive(Debug, Clone, PartialEq)]
pub enum OpponentArg {
    /// `cpu:LEVEL`: the scripted CPU at LEVEL (1-9).
    Cpu(u8),
    /// `model:FILE`: a trained model of the other side, played greedily.
    Model(PathBuf),
    /// `policy:NAME`: a built-in policy (idle, random or dodge).
    Policy(PolicyKind),
}

impl std::str::FromStr for OpponentArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, value) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected cpu:LEVEL, model:FILE or policy:NAME"))?;
        match kind {
            "cpu" => match value.parse::<u8>() {
                Ok(l @ 1..=9) => Ok(OpponentArg::Cpu(l)),
                _ => Err(format!("cpu:{value}: the CPU's level is 1 to 9")),
            },
            "model" if !value.is_empty() => Ok(OpponentArg::Model(PathBuf::from(value))),
            "model" => Err("model: needs a model file, e.g. model:marth.safetensors".into()),
            "policy" => match PolicyKind::from_str(value, false) {
                Ok(PolicyKind::Cpu) | Err(_) => Err(format!("policy:{value}: expected policy:idle, policy:random or policy:dodge (the CPU is cpu:LEVEL)")),
                Ok(p) => Ok(OpponentArg::Policy(p)),
            },
            _ => Err(format!("{s:?}: expected cpu:LEVEL, model:FILE or policy:NAME")),
        }
    }
}

/// `--epsilon`: a probability.
fn parse_epsilon(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(e) if (0.0..=1.0).contains(&e) => Ok(e),
        _ => Err(format!("{s:?}: expected a chance from 0 to 1, e.g. 0.05")),
    }
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
    /// With --policy cpu: the level of the CPU playing the bot's side, 1 to 9.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub bot_level: u8,
    /// The task the episodes are played and reported as (default: the model's, from
    /// its action set; untouchable for built-in policies).
    #[arg(long, value_enum)]
    pub task: Option<TaskArg>,
    /// CPU opponent level, 1 to 9 (the same as --opponent cpu:LEVEL).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub cpu_level: u8,
    /// The fighter the bot plays (default: the model's side; fox for built-in
    /// policies). In Dolphin the bot plays Fox.
    #[arg(long, value_enum)]
    pub side: Option<SideArg>,
    /// Who plays the other side: cpu:LEVEL (the scripted CPU; Melee's in Dolphin),
    /// model:FILE (a model trained for the other side) or policy:NAME (idle, random or
    /// dodge). In Dolphin a model or policy plays Marth on the opponent's port through
    /// a pipe of its own. Default: cpu at --cpu-level.
    #[arg(long, conflicts_with = "cpu_level")]
    pub opponent: Option<OpponentArg>,
    /// The chance that a model (the bot, and a model:FILE opponent) takes a random
    /// macro-action instead of its greedy one, 0 to 1. Default: 0.05 when a model plays
    /// a model (the simulator's only randomness is the CPU's: two greedy models would
    /// play one match over and over), 0 otherwise. Not with --human-port.
    #[arg(long, value_parser = parse_epsilon)]
    pub epsilon: Option<f64>,
    /// Episodes to play (one minute each at most); with --human-port, matches (each
    /// played to its end).
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
    /// With --backend dolphin: play against a person on this controller port (1-4)
    /// instead of Melee's CPU. With the GameCube controller adapter, the pad goes in the
    /// adapter's port of the same number (Dolphin reads adapter port N for game port
    /// N). Dolphin runs in real time; the person picks their character, presses START
    /// and picks the stage themselves before every match, and the bot waits for them as
    /// long as they take; each match is played to its end (docs/dolphin.md).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub human_port: Option<u8>,
    /// With --human-port: the bot's port (default 2, or 1 when the person is on 2).
    #[arg(long, requires = "human_port", value_parser = clap::value_parser!(u8).range(1..=4))]
    pub bot_port: Option<u8>,
    /// With --human-port: the person's controller as Dolphin names it in GCPadNew.ini's
    /// `Device =` (e.g. "evdev/0/Xbox Wireless Controller"), or "adapter" for
    /// Nintendo's GameCube controller adapter, which needs no mapping.
    #[arg(long, requires = "human_port", default_value = crate::games::versus::ADAPTER)]
    pub human_device: String,
    /// With --human-port and a standard pad: a Dolphin GCPad profile holding its button
    /// mapping (Dolphin saves them as Config/Profiles/GCPad/NAME.ini); its Device is
    /// used unless --human-device names another.
    #[arg(long, requires = "human_port")]
    pub human_profile: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The model file to evaluate.
    #[arg(long)]
    pub model: PathBuf,
    /// Episodes to play; 200 gives an interval of about +/- 6 points.
    #[arg(long, default_value_t = 200)]
    pub episodes: u32,
    /// CPU opponent level, 1 to 9 (the paper evaluates at 9; the same as --opponent cpu:LEVEL).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub cpu_level: u8,
    /// The fighter the model plays (default and only choice: the model's own side).
    #[arg(long, value_enum)]
    pub side: Option<SideArg>,
    /// Who plays the other side: cpu:LEVEL, model:FILE or policy:NAME (see `play --help`).
    #[arg(long, conflicts_with = "cpu_level")]
    pub opponent: Option<OpponentArg>,
    /// The chance that the model (and a model:FILE opponent) takes a random macro-action
    /// instead of its greedy one, 0 to 1. Default: 0.05 against a model opponent (two
    /// greedy models would play one match over and over), 0 otherwise (greedy).
    #[arg(long, value_parser = parse_epsilon)]
    pub epsilon: Option<f64>,
    /// Seed of the first episode.
    #[arg(long, default_value_t = 1_000_000)]
    pub seed: u64,
    /// The task the episodes are played and reported as (default: the model's, from
    /// its action set: a fight model is evaluated on the fight task).
    #[arg(long, value_enum)]
    pub task: Option<TaskArg>,
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
fn resolve_opponent(arg: Option<&OpponentArg>, cpu_level: u8, side: Side, task: Task, set: ActionSet) -> anyhow::Result<(u8, Option<Rival>)> {
    let theirs = side.other();
    match arg {
        None => Ok((cpu_level, None)),
        Some(OpponentArg::Cpu(level)) => Ok((*level, None)),
        Some(OpponentArg::Model(path)) => {
            let net = load_model(path).context("--opponent model:FILE")?;
            let meta = net.meta().clone();
            if meta.side != theirs {
                bail!(
                    "the opponent model {} plays {}, the bot's own side: against a {side} bot the opponent plays {theirs}; pass a model trained for {theirs}",
                    path.display(),
                    meta.side
                );
            }
            let spec = PolicySpec::Model(Box::new(net));
            let actions = spec.action_set(task)?;
            if actions != set {
                bail!(
                    "the opponent model {} chooses among the {actions} action set, the bot among the {set} set: both sides must play the same action set",
                    path.display()
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

/// A mean with the half-width of its 95 % interval (normal approximation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mean {
    pub mean: f64,
    pub half: f64,
}

impl Mean {
    fn of(xs: impl Iterator<Item = f64> + Clone) -> Mean {
        let n = xs.clone().count() as f64;
        if n == 0.0 {
            return Mean { mean: 0.0, half: 0.0 };
        }
        let mean = xs.clone().sum::<f64>() / n;
        let var = if n > 1.0 { xs.map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        Mean { mean, half: 1.959_963_984_540_054 * (var / n).sqrt() }
    }
}

/// The fight task's report over a set of matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FightSummary {
    pub matches: u64,
    pub won: u64,
    pub drawn: u64,
    pub lost: u64,
    pub stocks_taken: Mean,
    pub stocks_lost: Mean,
    /// Percent.
    pub damage_dealt: Mean,
    pub damage_taken: Mean,
}

impl FightSummary {
    pub fn of(results: &[EpisodeResult]) -> FightSummary {
        let count = |o| results.iter().filter(|r| r.tally.outcome() == o).count() as u64;
        let mean = |f: fn(&Tally) -> f64| Mean::of(results.iter().map(move |r| f(&r.tally)));
        FightSummary {
            matches: results.len() as u64,
            won: count(Outcome::Win),
            drawn: count(Outcome::Draw),
            lost: count(Outcome::Loss),
            stocks_taken: mean(|t| t.stocks_taken as f64),
            stocks_lost: mean(|t| t.stocks_lost as f64),
            damage_dealt: mean(|t| t.damage_dealt as f64),
            damage_taken: mean(|t| t.damage_taken as f64),
        }
    }

    /// The share of matches won and its 95 % (Wilson) interval.
    pub fn win_rate(&self) -> (f64, (f64, f64)) {
        (if self.matches == 0 { 0.0 } else { self.won as f64 / self.matches as f64 }, wilson95(self.won, self.matches))
    }
}

impl std::fmt::Display for FightSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rate, (lo, hi)) = self.win_rate();
        let m = |x: Mean| format!("{:.2} +/- {:.2}", x.mean, x.half);
        let pct = |x: Mean| format!("{:.1} +/- {:.1} %", x.mean, x.half);
        write!(
            f,
            "won {:.1} % ({}/{}), 95 % interval {:.1}-{:.1} %; drawn {}, lost {}; per match: stocks taken {}, stocks lost {}, damage dealt {}, damage taken {}",
            100.0 * rate,
            self.won,
            self.matches,
            100.0 * lo,
            100.0 * hi,
            self.drawn,
            self.lost,
            m(self.stocks_taken),
            m(self.stocks_lost),
            pct(self.damage_dealt),
            pct(self.damage_taken)
        )
    }
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
        Some(path) => {
            let net = load_model(path)?;
            let label = format!("model v{} ({})", net.meta().model_version, path.display());
            (PolicySpec::Model(Box::new(net)), label)
        }
        None if args.policy == PolicyKind::Cpu => (PolicySpec::Builtin(args.policy), format!("the level-{} CPU in the bot's place", args.bot_level)),
        None => (PolicySpec::Builtin(args.policy), format!("policy {:?}", args.policy).to_lowercase()),
    };
    let task = args.task.map_or_else(|| spec.default_task(), Task::from);
    let bot_cpu = (args.model.is_none() && args.policy == PolicyKind::Cpu).then_some(args.bot_level);
    if args.human_port.is_some() && (args.side.is_some() || args.opponent.is_some() || args.epsilon.is_some()) {
        bail!("--side, --opponent and --epsilon do not go with --human-port: against a person the bot plays Fox greedily, and the person is the opponent");
    }
    if let Some(human_port) = args.human_port {
        return play_against_person(&spec, &args, task, human_port, bot_cpu.is_some());
    }
    let side = spec.resolve_side(args.side)?;
    if args.backend == Backend::Dolphin && side != Side::Fox {
        bail!("in Dolphin the bot plays Fox (so far), and this one plays {side}: a {side} model plays there as the opponent, --opponent model:FILE beside a Fox --model");
    }
    let (cpu_level, rival) = resolve_opponent(args.opponent.as_ref(), args.cpu_level, side, task, spec.action_set(task)?)?;
    let epsilon = resolve_epsilon(args.epsilon, &spec, rival.as_ref());
    let m = Matches { task, side, cpu_level, rival, bot_cpu, episodes: args.episodes, seed: args.seed, epsilon };
    let results = match args.backend {
        Backend::Sim => {
            let as_side = if side == Side::Fox { String::new() } else { format!(" as {side}") };
            eprintln!("playing {} episodes ({}) of {label}{as_side}, {} on the simulator", args.episodes, task.name(), m.opponent_label());
            play_many(&spec, &m)?
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
            play_dolphin(&spec, &args, &m)?
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
            let t = r.tally;
            let fight = match task {
                Task::Fight => {
                    format!(", {:?}: stocks {}-{}, damage {:.0}-{:.0} %", t.outcome(), t.stocks_taken, t.stocks_lost, t.damage_dealt, t.damage_taken)
                        .to_lowercase()
                }
                Task::Untouchable => String::new(),
            };
            println!("episode {:>4} (seed {}): {what}, reward {:.2}{fight}", i + 1, args.seed + i as u64, r.reward);
        }
    }
    println!("{}", report(&label, &m, &results));
    Ok(())
}

pub fn eval(args: EvalArgs) -> anyhow::Result<()> {
    let net = load_model(&args.model)?;
    let version = net.meta().model_version;
    let spec = PolicySpec::Model(Box::new(net));
    let task = args.task.map_or_else(|| spec.default_task(), Task::from);
    let side = spec.resolve_side(args.side)?;
    let (cpu_level, rival) = resolve_opponent(args.opponent.as_ref(), args.cpu_level, side, task, spec.action_set(task)?)?;
    let epsilon = resolve_epsilon(args.epsilon, &spec, rival.as_ref());
    let m = Matches { task, side, cpu_level, rival, bot_cpu: None, episodes: args.episodes, seed: args.seed, epsilon };
    let how = if epsilon > 0.0 { format!("epsilon-greedily ({epsilon})") } else { "greedily".to_string() };
    eprintln!("evaluating model v{version} ({side}) {how} over {} episodes ({}), {}", args.episodes, task.name(), m.opponent_label());
    let results = play_many(&spec, &m)?;
    println!("{}", report(&format!("model v{version}"), &m, &results));
    Ok(())
}

// ---- The Dolphin backend (docs/dolphin.md) -------------------------------------------

/// `play --human-port`: the checks, then [`crate::games::versus`].
fn play_against_person(spec: &PolicySpec, args: &PlayArgs, task: Task, human_port: u8, bot_cpu: bool) -> anyhow::Result<()> {
    if args.backend != Backend::Dolphin {
        bail!("--human-port plays against a person in Dolphin: add --backend dolphin --iso PATH (the simulator has no controller for you)");
    }
    if bot_cpu {
        bail!("--policy cpu runs on the simulator only; against a person, pass --model FILE (or a built-in policy)");
    }
    let setup = crate::games::versus::ports(human_port, args.bot_port)?;
    let pad = crate::games::versus::human_pad(&args.human_device, args.human_profile.as_deref())?;
    let dolphin = DolphinSetup::check(args.iso.as_deref(), args.dolphin.as_deref())?;
    let set = spec.action_set(task)?;
    let mut policy = spec.build(set, 0.0);
    let results = crate::games::versus::play_against_person(&dolphin, setup, pad, policy.as_mut(), set, args.episodes, args.seed)?;
    let won = results.iter().filter(|r| r.bot_stocks > r.person_stocks).count();
    println!("the bot won {won} of {} matches against you", results.len());
    Ok(())
}

/// Play the episodes in one Dolphin, one after the other (a match per episode: the
/// backend's reset quits the last one and goes through the menus); against Melee's CPU,
/// or against `m.rival` on the opponent's port through its own pipe.
fn play_dolphin(spec: &PolicySpec, args: &PlayArgs, m: &Matches) -> anyhow::Result<Vec<EpisodeResult>> {
    let dolphin = DolphinSetup::check(args.iso.as_deref(), args.dolphin.as_deref())?;
    let set = spec.action_set(m.task)?;
    let setup = MatchSetup { cpu_level: m.cpu_level, ..MatchSetup::default() };
    let mut policy = spec.build(set, m.epsilon);
    let (results, stats) = match &m.rival {
        None => {
            let mut env = Env::new(dolphin.launch(setup)?, setup, m.task, set);
            (episodes_of(&mut env, policy.as_mut(), m)?, env.emulator().stats())
        }
        Some(r) => {
            let opponent = Opponent::Policy { policy: r.spec.build(r.actions, m.epsilon), actions: r.actions, model_version: r.version };
            let duel = DolphinDuel::new(dolphin.launch_against_bot(setup)?, opponent, m.task, stream(Side::Marth)).map_err(anyhow::Error::msg)?;
            let mut env = Env::new(duel, setup, m.task, set);
            (episodes_of(&mut env, policy.as_mut(), m)?, env.emulator().dolphin().stats())
        }
    };
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

/// `m`'s episodes, one after the other, on one environment.
fn episodes_of<E: Emulator>(env: &mut Env<E>, policy: &mut dyn Policy, m: &Matches) -> anyhow::Result<Vec<EpisodeResult>> {
    (0..m.episodes)
        .map(|i| {
            let seed = m.seed.wrapping_add(i as u64);
            run_episode(env, policy, m.cpu_level, seed, seed ^ stream(Side::Fox))
        })
        .collect()
}
