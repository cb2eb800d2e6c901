//! `shine-worker play --human-port N`: a person against the bot in Dolphin.
//!
//! The person's port is mapped to their own controller (the GameCube controller adapter
//! by default, whose port N Dolphin reads for game port N, or any pad Dolphin sees, with
//! the mapping of a Dolphin GCPad profile); the bot plays on another port through its
//! pipe. The menus leave the person's hand alone, and the person sets the pace: they
//! pick their character, press START and pick the stage themselves, between every two
//! matches, taking as long as they like, and the terminal says what the bot waits for
//! (a match their port played as Melee's CPU, their slot left on CPU, is quit and not
//! counted). The bot's hand puts the bot's coin on Fox, the character it was trained
//! as. Dolphin runs in real time, and each match is played to its end (stocks or the
//! clock), not cut at a minute as training episodes are. The state the bot sees is
//! always from its own point of view, its opponent's 13 floats first, whichever ports
//! the two have (`agent::state`). Ctrl-C stops it at any point (Dolphin, in the
//! terminal's process group, gets it too).

use crate::games::backend::DolphinSetup;
use anyhow::{bail, Context};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use shine_agent::actions::ActionSet;
use shine_agent::policy::Policy;
use shine_agent::state::{Observation, StateReader};
use shine_bridge::dolphin::css::{self, scene};
use shine_bridge::dolphin::menu::Task;
use shine_bridge::dolphin::{Dolphin, HumanPad};
use shine_bridge::melee::characters::{describe, Character};
use shine_bridge::{Emulator, MatchSetup, RamView};
use std::path::Path;

/// `--human-device`'s value for the GameCube controller adapter.
pub const ADAPTER: &str = "adapter";

/// The person's controller from `--human-device` and `--human-profile`.
pub fn human_pad(device: &str, profile: Option<&Path>) -> anyhow::Result<HumanPad> {
    match profile {
        None if device == ADAPTER => Ok(HumanPad::Adapter),
        None => bail!(
            "--human-device {device:?} is a standard pad: Dolphin also needs its button mapping. Map it once in Dolphin (Controllers, \
             Standard Controller, Configure), save a profile, and pass it with --human-profile \
             ~/.local/share/dolphin-emu/Config/Profiles/GCPad/NAME.ini (or leave --human-device at \"adapter\" for a GameCube controller adapter)"
        ),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading the Dolphin profile {}", path.display()))?;
            let device = (device != ADAPTER).then_some(device);
            HumanPad::from_profile(&text, device).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
        }
    }
}

/// The ports of a match against a person on `human_port` (1..=4, as the game counts
/// them): the bot on `bot_port`, or else port 2 (port 1 when the person is on 2).
pub fn ports(human_port: u8, bot_port: Option<u8>) -> anyhow::Result<MatchSetup> {
    let bot_port = bot_port.unwrap_or(if human_port == 2 { 1 } else { 2 });
    for (what, p) in [("--human-port", human_port), ("--bot-port", bot_port)] {
        if !(1..=4).contains(&p) {
            bail!("{what} {p} is not a controller port: use 1, 2, 3 or 4");
        }
    }
    if bot_port == human_port {
        bail!("the bot and the person are both on port {human_port}: give them different ports (--bot-port)");
    }
    Ok(MatchSetup { agent_port: usize::from(bot_port - 1), opponent_port: usize::from(human_port - 1), ..MatchSetup::default() })
}

/// How a match against a person ended.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchResult {
    /// The character the person played.
    pub person_character: String,
    /// Frames the bot played.
    pub frames: u64,
    /// Stocks left on the last frame of the match, the bot's and the person's.
    pub bot_stocks: u8,
    pub person_stocks: u8,
}

impl std::fmt::Display for MatchResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match self.bot_stocks.cmp(&self.person_stocks) {
            std::cmp::Ordering::Greater => "the bot won",
            std::cmp::Ordering::Less => "you won",
            std::cmp::Ordering::Equal => "even on stocks",
        };
        write!(
            f,
            "you as {}: {who}: stocks left bot {}, you {}, after {:.1} s",
            self.person_character,
            self.bot_stocks,
            self.person_stocks,
            self.frames as f64 / 60.0
        )
    }
}

/// Whether a match is on screen with both fighters in it.
fn in_match(ram: RamView, setup: &MatchSetup) -> bool {
    let on = matches!(css::scene(ram), Ok((scene::MAJOR_VS, scene::IN_GAME | scene::SUDDEN_DEATH)));
    let fighter = |p: usize| ram.player(p).and_then(|pl| pl.fighter()).is_ok_and(|f| f.is_some());
    on && fighter(setup.agent_port) && fighter(setup.opponent_port)
}

/// What the terminal says when a menu step that waits for the person on `port` (1..=4)
/// begins; `None` for the bot's own steps.
pub fn person_message(task: Task, port: usize) -> Option<String> {
    Some(match task {
        Task::PersonCoin => format!("waiting for you: put your coin on a character (port {port})"),
        Task::PersonStart => format!("waiting for you: press START on port {port} when ready (change character first if you like)"),
        Task::PersonStage => format!("waiting for you: pick a stage (port {port})"),
        Task::PersonSlot => format!("your slot (port {port}) is set to CPU: press its HMN/CPU toggle until it reads HMN"),
        Task::PersonSilent => format!(
            "no input from port {port} for a minute: is your controller in the adapter's port {port}? (Dolphin reads the adapter's port N \
             for game port N; with --human-device, is that the device Dolphin sees?)"
        ),
        Task::QuitCpuMatch => format!("port {port} played as Melee's CPU (its slot was not HMN): quitting that match; it is not counted"),
        _ => return None,
    })
}

/// One match to its end: the menus walked (the person picks their character and starts
/// the match; what the bot waits for is said on stderr), then the policy plays its
/// macro-actions frame by frame until the match leaves the screen.
pub fn play_match(emu: &mut Dolphin, policy: &mut dyn Policy, set: ActionSet, seed: u64) -> anyhow::Result<MatchResult> {
    let setup = emu.setup();
    let port = setup.opponent_port + 1;
    emu.reset_traced(setup, &mut |t| {
        if let Some(line) = t.task.and_then(|task| person_message(task, port)) {
            eprintln!("{line}");
        }
    })
    .context("walking the menus to a match against the person")?;
    let person_character = emu
        .ram()
        .player(setup.opponent_port)
        .and_then(|p| p.fighter())
        .ok()
        .flatten()
        .and_then(|f| f.internal_character().ok())
        .map_or("an unknown character".to_string(), |id| describe(Character::by_internal(id), id));
    let mut reader = StateReader::new();
    let mut obs: Observation = reader.read(emu.ram(), &setup)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut frames = 0u64;
    loop {
        let a = policy.act(&obs, &mut rng);
        reader.set_shine_flag(set.is_shine(a));
        for pad in set.script(a).expect("the policy picks from its own action set") {
            emu.step(pad).context("playing the match")?;
            if !in_match(emu.ram(), &setup) {
                // The clock ran out (or the match was quit): the last frame seen counts.
                return Ok(MatchResult { person_character, frames, bot_stocks: obs.agent.stocks, person_stocks: obs.opponent.stocks });
            }
            obs = reader.read(emu.ram(), &setup)?;
            frames += 1;
            if obs.agent.stocks == 0 || obs.opponent.stocks == 0 {
                // "GAME!": the next reset walks the results back to character select.
                return Ok(MatchResult { person_character, frames, bot_stocks: obs.agent.stocks, person_stocks: obs.opponent.stocks });
            }
        }
    }
}

/// `play --human-port`: `matches` matches in one Dolphin, each reported as it ends.
pub fn play_against_person(
    dolphin: &DolphinSetup,
    setup: MatchSetup,
    pad: HumanPad,
    policy: &mut dyn Policy,
    set: ActionSet,
    matches: u32,
    seed: u64,
) -> anyhow::Result<Vec<MatchResult>> {
    let mut emu = dolphin.launch_against_person(setup, pad)?;
    eprintln!(
        "Dolphin is up: pick your character with the controller on port {} (the bot is Fox on port {}), then press START and pick a stage; \
         the bot waits for you as long as you take (Ctrl-C stops)",
        setup.opponent_port + 1,
        setup.agent_port + 1
    );
    let mut results = vec![];
    for i in 0..matches {
        let r = play_match(&mut emu, policy, set, seed.wrapping_add(u64::from(i)))?;
        println!("match {:>3}: {r}", i + 1);
        results.push(r);
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_default_to_the_other_of_one_and_two_and_refuse_nonsense() {
        let s = ports(1, None).unwrap();
        assert_eq!((s.agent_port, s.opponent_port), (1, 0));
        let s = ports(2, None).unwrap();
        assert_eq!((s.agent_port, s.opponent_port), (0, 1));
        let s = ports(4, Some(3)).unwrap();
        assert_eq!((s.agent_port, s.opponent_port), (2, 3));
        assert!(ports(2, Some(2)).unwrap_err().to_string().contains("different ports"));
        assert!(ports(5, None).unwrap_err().to_string().contains("1, 2, 3 or 4"));
        assert!(ports(1, Some(0)).unwrap_err().to_string().contains("--bot-port 0"));
    }

    #[test]
    fn a_standard_pad_needs_a_profile_and_the_adapter_does_not() {
        assert_eq!(human_pad(ADAPTER, None).unwrap(), HumanPad::Adapter);
        let err = human_pad("evdev/0/Xbox Wireless Controller", None).unwrap_err().to_string();
        assert!(err.contains("--human-profile") && err.contains("Profiles/GCPad"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("pad.ini");
        std::fs::write(&profile, "[Profile]\nDevice = evdev/0/Pad\nButtons/A = `SOUTH`\n").unwrap();
        match human_pad(ADAPTER, Some(&profile)).unwrap() {
            HumanPad::Mapped { device, mapping } => {
                assert_eq!(device, "evdev/0/Pad", "the profile's own device");
                assert_eq!(mapping, [("Buttons/A".to_string(), "`SOUTH`".to_string())]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(human_pad("SDL/0/Other", Some(&profile)).unwrap(), HumanPad::Mapped { device, .. } if device == "SDL/0/Other"));
        assert!(human_pad(ADAPTER, Some(&dir.path().join("missing.ini"))).unwrap_err().to_string().contains("missing.ini"));
    }
}
