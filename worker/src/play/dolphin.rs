//! `play --backend dolphin`: the episodes in one Dolphin against Melee's CPU or a
//! policy on the opponent's port, and `--human-port`, a person against the bot
//! (docs/dolphin.md, docs/play-your-bot.md). Ctrl-C ends either at any point: Dolphin
//! is stopped, its temporary user folder removed, and the episodes or matches played
//! so far are summed up as when all were played.

use super::{report, PlayArgs};
use crate::games::backend::{Backend, DolphinSetup};
use crate::games::duel::DolphinDuel;
use crate::games::matches::{run_episode, stream, EpisodeResult, Matches, PolicySpec};
use crate::games::versus::{self, End};
use anyhow::bail;
use shine_agent::policy::Policy;
use shine_agent::task::Task;
use shine_agent::{Env, Side};
use shine_bridge::dolphin::{Dolphin, Interrupt};
use shine_bridge::{Emulator, MatchSetup};
use tokio_util::sync::CancellationToken;

/// Ctrl-C (and SIGTERM) for the Dolphin paths, by the one shutdown pattern
/// (`shine_agent::shutdown`): a runtime of one thread hears the signals and cancels a
/// token, which the Dolphins launched with [`Stop::interrupt`] ask between frames. A
/// second signal exits at once.
struct Stop {
    token: CancellationToken,
    _signals: tokio::runtime::Runtime,
}

impl Stop {
    fn on_signals() -> anyhow::Result<Stop> {
        let signals = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let token = CancellationToken::new();
        signals.block_on(async { shine_agent::shutdown::cancel_on_signals(token.clone()) })?;
        Ok(Stop { token, _signals: signals })
    }

    fn interrupt(&self) -> Interrupt {
        let token = self.token.clone();
        Interrupt::new(move || token.is_cancelled())
    }
}

/// `play --human-port`: the checks, then [`crate::games::versus`]; the bot plays
/// `side`'s fighter.
pub(super) fn play_human_port(spec: &PolicySpec, args: &PlayArgs, task: Task, side: Side, human_port: u8, bot_cpu: bool) -> anyhow::Result<()> {
    if args.backend != Backend::Dolphin {
        bail!("--human-port plays against a person in Dolphin: add --backend dolphin --iso PATH (the simulator has no controller for you)");
    }
    if bot_cpu {
        bail!("--policy cpu runs on the simulator only; against a person, pass --model FILE (or a built-in policy)");
    }
    let setup = versus::ports(human_port, args.bot_port)?;
    let pad = versus::human_pad(&args.human_device, args.human_profile.as_deref())?;
    let stop = Stop::on_signals()?;
    let dolphin = DolphinSetup::check(args.iso.as_deref(), args.dolphin.as_deref())?.with_interrupt(stop.interrupt());
    let set = spec.action_set(task)?;
    let mut policy = spec.build(set, 0.0);
    let session = versus::play_against_person(&dolphin, setup, pad, side.character(), policy.as_mut(), set, args.episodes, args.seed);
    match &session.end {
        End::Interrupted => eprintln!("stopped (Ctrl-C): Dolphin is stopped and its user folder removed"),
        End::Closed => eprintln!("Dolphin was closed: the session ends"),
        End::Played | End::Failed(_) => {}
    }
    println!("{}", session.summary());
    match session.end {
        End::Failed(e) => Err(e),
        _ => Ok(()),
    }
}

/// Play the episodes in one Dolphin, one after the other (a match per episode: the
/// backend's reset quits the last one and goes through the menus); against Melee's CPU,
/// or against `m.rival` on the opponent's port through its own pipe. Prints the per
/// episode lines and the report, as on the simulator.
pub(super) fn play_dolphin(spec: &PolicySpec, args: &PlayArgs, m: &Matches, label: &str) -> anyhow::Result<()> {
    let stop = Stop::on_signals()?;
    let dolphin = DolphinSetup::check(args.iso.as_deref(), args.dolphin.as_deref())?.with_interrupt(stop.interrupt());
    let set = spec.action_set(m.task)?;
    let setup = MatchSetup { cpu_level: m.cpu_level, ..MatchSetup::default() };
    let mut policy = spec.build(set, m.epsilon);
    let launched = match &m.rival {
        None => dolphin.launch(setup).map(|emu| {
            let mut env = Env::new(emu, setup, m.task, set);
            let played = episodes_of(&mut env, policy.as_mut(), m, &dolphin, Dolphin::closed_by_user);
            (played, env.emulator().stats())
        }),
        Some(r) => dolphin.launch_against_bot(setup).map(|emu| {
            let duel = DolphinDuel::new(emu, r.build(m.epsilon), m.task, stream(Side::Marth));
            let mut env = Env::new(duel, setup, m.task, set);
            let played = episodes_of(&mut env, policy.as_mut(), m, &dolphin, |d: &mut DolphinDuel| d.dolphin_mut().closed_by_user());
            (played, env.emulator().dolphin().stats())
        }),
    };
    let (played, stats) = match launched {
        Ok(done) => done,
        Err(_) if dolphin.interrupted() => ((vec![], End::Interrupted), Default::default()),
        Err(e) => return Err(e),
    };
    let (results, end) = played;
    // Skipped frames ran on a stale pad: the paper's agent suffered from them unseen.
    eprintln!(
        "dolphin: {} frames, {} skipped ({:.2} %), {} launch(es)",
        stats.ticks,
        stats.skipped,
        100.0 * stats.skipped as f64 / stats.ticks.max(1) as f64,
        stats.launches
    );
    super::print_episodes(args, m, &results);
    match end {
        End::Interrupted => {
            eprintln!("stopped (Ctrl-C) after {} of {} episodes: Dolphin is stopped and its user folder removed", results.len(), m.episodes)
        }
        End::Closed => eprintln!("Dolphin was closed after {} of {} episodes", results.len(), m.episodes),
        _ => {}
    }
    println!("{}", report(label, m, &results));
    match end {
        End::Failed(e) => Err(e),
        _ => Ok(()),
    }
}

/// `m`'s episodes, one after the other, on one environment, and how they ended: all
/// played, or early (Ctrl-C, Dolphin closed: `closed` asks the emulator, or a failure),
/// the episodes before it kept.
fn episodes_of<E: Emulator>(
    env: &mut Env<E>,
    policy: &mut dyn Policy,
    m: &Matches,
    dolphin: &DolphinSetup,
    closed: impl Fn(&mut E) -> bool,
) -> (Vec<EpisodeResult>, End) {
    let mut results = vec![];
    for i in 0..m.episodes {
        let seed = m.seed.wrapping_add(i as u64);
        match run_episode(env, policy, m.cpu_level, seed, seed ^ stream(Side::Fox)) {
            Ok(r) => results.push(r),
            Err(e) => return (results, End::of(e, dolphin, || closed(env.emulator_mut()))),
        }
    }
    (results, End::Played)
}
