//! `shine-worker play --human-port N`: a person against the bot in Dolphin.
//!
//! The person's port is mapped to their own controller (the GameCube controller adapter
//! by default, whose port N Dolphin reads for game port N, or any pad Dolphin sees, with
//! the mapping of a Dolphin GCPad profile); the bot plays on another port through its
//! pipe. The menus leave the person's hand alone, and the person sets the pace: they
//! pick their character, press START and pick the stage themselves, between every two
//! matches, taking as long as they like, and the terminal says what the bot waits for
//! (a port with no controller in it at once; a match that Melee's CPU plays for either
//! of them, a slot toggled by mistake, is quit and not counted). The bot's hand puts
//! the bot's coin on the fighter its model was trained as (Fox, or Marth for a Marth
//! model). Dolphin runs in real time, and each match is played to its end (stocks or
//! the clock), not cut at a minute as training episodes are. The state the bot sees is
//! always from its own point of view, its opponent's 13 floats first, whichever ports
//! the two have (`agent::state`).
//!
//! The session ends after the matches asked for, on Ctrl-C, or when the person closes
//! Dolphin (Esc, or its window): Dolphin is stopped, its temporary user folder removed,
//! and a summary of the matches played is printed, whichever it was.

use crate::games::backend::DolphinSetup;
use anyhow::{bail, Context};
use shine_agent::actions::ActionSet;
use shine_agent::policy::Policy;
use shine_agent::Seat;
use shine_bridge::dolphin::css::{self, scene};
use shine_bridge::dolphin::menu::Task;
use shine_bridge::dolphin::{Dolphin, DolphinError, HumanPad};
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

/// What the terminal says when a menu step that concerns the person begins, with the
/// person on `port` and the bot on `bot_port` (both 1..=4); `None` for the bot's own
/// steps.
pub fn person_message(task: Task, port: usize, bot_port: usize) -> Option<String> {
    Some(match task {
        Task::PersonCoin => format!("waiting for you: put your coin on a character (port {port})"),
        Task::PersonStart => format!("waiting for you: press START on port {port} when ready (change character first if you like)"),
        Task::PersonStage => format!("waiting for you: pick a stage (port {port})"),
        Task::PersonUnplugged => format!(
            "no controller in port {port}: plug yours into the GameCube controller adapter's port {port} (Dolphin reads the adapter's \
             port N for game port N); the bot waits"
        ),
        Task::PersonSlot => format!(
            "your slot (port {port}) is set to CPU (Melee does that when a controller is unplugged, and the HMN/CPU toggle does it): \
             press its HMN/CPU toggle until it reads HMN"
        ),
        Task::PersonSilent => format!(
            "no input from port {port} for a minute: is your controller in the adapter's port {port}? (Dolphin reads the adapter's port N \
             for game port N; with --human-device, is that the device Dolphin sees?)"
        ),
        Task::QuitCpuMatch => format!("port {port} played as Melee's CPU (its slot was not HMN): quitting that match; it is not counted"),
        Task::QuitBotCpuMatch => format!(
            "the bot's port {bot_port} played as Melee's CPU (a hand pressed its HMN/CPU toggle before START): quitting that match; it is not \
             counted. The bot's hand sets its slot back to HMN: wait for that before you press START"
        ),
        _ => return None,
    })
}

/// One match to its end: the menus walked (the person picks their character and starts
/// the match; what the bot waits for is said on stderr), then the policy plays its
/// macro-actions frame by frame from its [`Seat`] until the match leaves the screen.
pub fn play_match(emu: &mut Dolphin, policy: &mut dyn Policy, set: ActionSet, seed: u64) -> anyhow::Result<MatchResult> {
    let setup = emu.setup();
    let (port, bot_port) = (setup.opponent_port + 1, setup.agent_port + 1);
    emu.reset_traced(setup, &mut |t| {
        if let Some(line) = t.task.and_then(|task| person_message(task, port, bot_port)) {
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
    let mut bot = Seat::new(policy, set, setup, seed);
    let mut obs = bot.restart(setup, emu.ram())?;
    let mut frames = 0u64;
    loop {
        emu.step(&bot.pad()).map_err(|e| match e {
            // Dolphin's own pause (F10) stops the game's frames, which ends a match
            // after the frame timeout; Melee's (START) does not.
            DolphinError::NoFrames { .. } => anyhow::Error::new(e).context(
                "the match stopped (F10 in Dolphin's window pauses the emulator, and a match that stands still for 5 s ends the session; \
                 pause the match with START instead)",
            ),
            e => anyhow::Error::new(e).context("playing the match"),
        })?;
        if !in_match(emu.ram(), &setup) {
            // The clock ran out (or the match was quit): the last frame seen counts.
            return Ok(MatchResult { person_character, frames, bot_stocks: obs.agent.stocks, person_stocks: obs.opponent.stocks });
        }
        bot.observe(emu.ram())?;
        obs = *bot.observation().expect("read just now");
        frames += 1;
        if obs.agent.stocks == 0 || obs.opponent.stocks == 0 {
            // "GAME!": the next reset walks the results back to character select.
            return Ok(MatchResult { person_character, frames, bot_stocks: obs.agent.stocks, person_stocks: obs.opponent.stocks });
        }
    }
}

/// The matches of one session and how it ended.
pub struct Session {
    pub results: Vec<MatchResult>,
    pub end: End,
}

/// How a session against a person ended.
#[derive(Debug)]
pub enum End {
    /// Every match asked for was played.
    Played,
    /// Ctrl-C (or SIGTERM).
    Interrupted,
    /// The person closed Dolphin (Esc, or its window).
    Closed,
    /// Something failed; the matches before it stand.
    Failed(anyhow::Error),
}

impl End {
    /// How a session that stopped on `e` ended: Ctrl-C first (the terminal sends it to
    /// Dolphin too, which may be seen to exit before the interrupt is), then Dolphin
    /// closed by the person (`closed` asks it: Esc, the window closed, or Dolphin's own
    /// handling of the Ctrl-C), else a failure.
    pub fn of(e: anyhow::Error, dolphin: &DolphinSetup, closed: impl FnOnce() -> bool) -> End {
        if dolphin.interrupted() {
            End::Interrupted
        } else if closed() {
            End::Closed
        } else {
            End::Failed(e)
        }
    }
}

impl Session {
    /// The summary line: the matches played and who won them.
    pub fn summary(&self) -> String {
        let n = self.results.len();
        let count = |o: std::cmp::Ordering| self.results.iter().filter(|r| r.bot_stocks.cmp(&r.person_stocks) == o).count();
        let (bot, you, even) = (count(std::cmp::Ordering::Greater), count(std::cmp::Ordering::Less), count(std::cmp::Ordering::Equal));
        format!("the bot won {bot} of {n} matches against you (you won {you}, {even} even on stocks)")
    }
}

/// `play --human-port`: `matches` matches in one Dolphin, each reported as it ends,
/// the bot on `bot` (its model's fighter). Ends early on Ctrl-C (the setup's
/// interrupt), when the person closes Dolphin, or on a failure; the matches played so
/// far are kept whichever it was, and Dolphin is stopped (its temporary user folder
/// removed) before this returns.
#[allow(clippy::too_many_arguments)]
pub fn play_against_person(
    dolphin: &DolphinSetup,
    setup: MatchSetup,
    pad: HumanPad,
    bot: Character,
    policy: &mut dyn Policy,
    set: ActionSet,
    matches: u32,
    seed: u64,
) -> Session {
    let mut results = vec![];
    let mut emu = match dolphin.launch_against_person(setup, pad, bot) {
        Ok(emu) => emu,
        Err(e) => return Session { results, end: End::of(e, dolphin, || false) },
    };
    eprintln!(
        "Dolphin is up (pid {}, user folder {}): pick your character with the controller on port {} (the bot is {bot} on port {}), \
         then press START and pick a stage; the bot waits for you as long as you take. Ctrl-C here, or Esc in Dolphin's window, ends \
         the session",
        emu.pid(),
        emu.user_dir().display(),
        setup.opponent_port + 1,
        setup.agent_port + 1
    );
    let mut end = End::Played;
    for i in 0..matches {
        match play_match(&mut emu, policy, set, seed.wrapping_add(u64::from(i))) {
            Ok(r) => {
                println!("match {:>3}: {r}", i + 1);
                results.push(r);
            }
            Err(e) => {
                end = End::of(e, dolphin, || emu.closed_by_user());
                break;
            }
        }
    }
    drop(emu);
    Session { results, end }
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
