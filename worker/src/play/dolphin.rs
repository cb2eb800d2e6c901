//! `play --backend dolphin`: the episodes in one Dolphin against Melee's CPU or a
//! policy on the opponent's port, and `--human-port`, a person against the bot
//! (docs/dolphin.md).

use super::{run_episode, stream, EpisodeResult, Matches, PlayArgs, PolicySpec};
use crate::games::backend::{Backend, DolphinSetup};
use crate::games::duel::{DolphinDuel, Opponent};
use anyhow::bail;
use shine_agent::policy::Policy;
use shine_agent::task::Task;
use shine_agent::{Env, Side};
use shine_bridge::{Emulator, MatchSetup};

/// `play --human-port`: the checks, then [`crate::games::versus`].
pub(super) fn play_against_person(spec: &PolicySpec, args: &PlayArgs, task: Task, human_port: u8, bot_cpu: bool) -> anyhow::Result<()> {
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
pub(super) fn play_dolphin(spec: &PolicySpec, args: &PlayArgs, m: &Matches) -> anyhow::Result<Vec<EpisodeResult>> {
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
