//! `shine-worker play` and `shine-worker eval`: watch a policy play, and measure it.
//!
//! Both run whole episodes on the embedded simulator against the scripted CPU, or a
//! model or built-in policy on the other side ([`Matches::rival`]; two models each take
//! a random action now and then, [`MODEL_VS_MODEL_EPSILON`]), through the match engine
//! of [`crate::games::matches`]; `play` also in Dolphin,
//! against Melee's CPU, a second bot on the opponent's port, or a person. For the
//! Untouchable task they report full-minute survival with a 95 % (Wilson)
//! interval; for the fight task, matches won (Wilson interval too), drawn and lost, and
//! stocks and damage per match with 95 % intervals ([`FightSummary`]). Episode `i` uses
//! seed `seed + i`, so a run is reproducible and two policies can be compared on the
//! very same matches.
//!
//! Here: the commands, and the policy and opponent the arguments name; the arguments
//! in `args` (the matches' terms once for both commands), the figures in `summary`,
//! the Dolphin paths in `dolphin`.

mod args;
mod dolphin;
mod summary;

pub use args::{EvalArgs, MatchArgs, ModelSource, OpponentArg, PlayArgs, SideArg, TaskArg};
pub use summary::{FightSummary, Mean};

use crate::games::backend::Backend;
#[cfg(doc)]
use crate::games::matches::MODEL_VS_MODEL_EPSILON;
use crate::games::matches::{play_many, resolve_epsilon, EpisodeResult, Matches, PolicyKind, PolicySpec, RivalSpec};
use anyhow::{bail, Context};
use dolphin::{play_dolphin, play_human_port};
use shine_agent::actions::ActionSet;
use shine_agent::model::QNet;
use shine_agent::task::{EpisodeEnd, Task};
use shine_agent::Side;
use summary::summarize;

/// `--opponent` (or `--cpu-level`) made into the matches' opponent: the CPU's level,
/// or a rival policy, checked against the bot's side and action set.
fn resolve_opponent(
    arg: Option<&OpponentArg>,
    token: Option<&str>,
    cpu_level: u8,
    side: Side,
    task: Task,
    set: ActionSet,
) -> anyhow::Result<(u8, Option<RivalSpec>)> {
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
            Ok((cpu_level, Some(RivalSpec { spec, actions, version: meta.model_version, label })))
        }
        Some(OpponentArg::Policy(kind)) => {
            let spec = PolicySpec::Builtin(*kind);
            let actions = spec.action_set(task).context("--opponent policy:NAME")?;
            Ok((cpu_level, Some(RivalSpec { spec, actions, version: 0, label: format!("policy {kind:?}").to_lowercase() })))
        }
    }
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
    let side = spec.resolve_side(args.terms.side.map(Side::from))?;
    if let Some(human_port) = args.human_port {
        return play_human_port(&spec, &args, task, side, human_port, bot_cpu.is_some());
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
    let side = spec.resolve_side(args.terms.side.map(Side::from))?;
    let (cpu_level, rival) = resolve_opponent(args.terms.opponent.as_ref(), args.token.as_deref(), args.terms.cpu_level, side, task, spec.action_set(task)?)?;
    let epsilon = resolve_epsilon(args.terms.epsilon, &spec, rival.as_ref());
    let m = Matches { task, side, cpu_level, rival, bot_cpu: None, episodes: args.episodes, seed: args.seed, epsilon };
    let how = if epsilon > 0.0 { format!("epsilon-greedily ({epsilon})") } else { "greedily".to_string() };
    eprintln!("evaluating model v{version} ({side}) {how} over {} episodes ({}), {}", args.episodes, task.name(), m.opponent_label());
    let results = play_many(&spec, &m)?;
    println!("{}", report(&format!("model v{version}"), &m, &results));
    Ok(())
}
