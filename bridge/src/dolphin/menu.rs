//! Getting a real Melee (NTSC 1.02) from wherever it is into a fresh match: the
//! decision logic only, one pad per driven port per frame from what RAM says, so it is
//! unit-tested on synthetic RAM images and [`super::Dolphin`] just applies it. The RAM
//! layout and the screen geometry are [`super::css`]; the characters' ids are
//! [`crate::melee::characters`].
//!
//! Two hands, each on its own port's pipe, as in the references (libmelee's
//! `menuhelper.py`, the paper's `cpu.py`):
//! - the bot's hand puts its coin on the bot's character (default Fox), and makes its
//!   own port a human one if it is a CPU or off (the slot's toggle cycles human, CPU,
//!   off), so that a CPU never plays in the bot's place;
//! - the CPU port's hand lets go of the level slider if it holds it, puts its coin on
//!   the CPU's character (default Marth), then switches its own port to CPU on its
//!   HMN/CPU toggle, then grabs the level slider, drags it until the level byte reads
//!   the level asked, and lets go;
//! - against a person ([`Opponent::Human`]) there is no second hand: their port is
//!   theirs, they pick their own character, press START and pick the stage themselves,
//!   as slowly as they like (the steps that wait for them have no budget), and their
//!   slot must be a human one; a port with no controller in it (the hand's state 3) is
//!   said at once;
//! - against a second bot on its own pipe ([`Opponent::Bot`], a model playing the other
//!   side) that port's hand does what the bot's does: its coin on the opponent's
//!   character (default Marth), its port a human one;
//! - with everything read back from RAM as set, the bot's hand presses START once the
//!   "ready to fight" banner is shown; on stage select it picks Final Destination;
//! - in the match, both ports must be played as set up (the static player block's slot
//!   type): the bot's by its pipe (human), the opponent's by Melee's CPU or a human
//!   one. Anyone's hand can press any slot's HMN/CPU toggle, and START may follow at
//!   once: such a match is quit, not played, and never handed to the bot.
//!
//! Every decision is taken again each frame from RAM (closed loop): a press that the
//! game missed is simply repeated. A played match is quit by pressing L+R+A+START and
//! releasing them, again and again, until the scene changes (the paper's way: the first
//! press pauses, the next quits). The title screen gets START and the main menu is
//! walked to VS mode (libmelee's `choose_versus_mode`). The results screens get START.
//!
//! Each step has a budget of frames ([`Task::budget`]); a step that outlives it is an
//! error that names the step, what RAM said, and what to check. The steps that wait for
//! a person have none ([`Task::waits_for_person`]): the person sets the pace.

use super::css::{self, scene, Grab, HandState, PortView, SlotType};
use crate::melee::action;
use crate::melee::characters::{self, describe, Character};
use crate::pad::{Button, Pad};
use crate::ram::{RamError, RamView};
use thiserror::Error;

/// Who plays the opponent's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Opponent {
    /// Melee's CPU at [`MenuGoal::cpu_level`] as [`MenuGoal::cpu_character`], set up by
    /// that port's own hand through its own pipe.
    #[default]
    Cpu,
    /// A person on their own controller: the navigator never drives that port, waits
    /// for their coin, and accepts whichever character they pick.
    Human,
    /// A second bot on its own pipe, as [`MenuGoal::cpu_character`] on a human (HMN)
    /// slot: its own hand sets it up as the bot's hand does.
    Bot,
}

impl Opponent {
    /// How RAM descriptions name the opponent's port.
    pub fn name(self) -> &'static str {
        match self {
            Opponent::Cpu => "CPU",
            Opponent::Human => "human",
            Opponent::Bot => "opponent bot",
        }
    }
}

/// What the match should be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MenuGoal {
    pub agent_port: usize,
    pub opponent_port: usize,
    pub opponent: Opponent,
    pub cpu_level: u8,
    pub agent_character: Character,
    /// The opponent's character when the navigator picks it (a CPU's or an opponent
    /// bot's).
    pub cpu_character: Character,
    /// Stage cursor target on the stage-select screen.
    pub stage: (f32, f32),
}

impl Default for MenuGoal {
    fn default() -> Self {
        MenuGoal {
            agent_port: 1,
            opponent_port: 0,
            opponent: Opponent::Cpu,
            cpu_level: 9,
            agent_character: characters::FOX,
            cpu_character: characters::MARTH,
            stage: css::FINAL_DESTINATION,
        }
    }
}

/// One frame's pads: the bot's port and the opponent's port (the CPU's or an opponent
/// bot's), each on its own pipe (against a person, `cpu` goes nowhere).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pads {
    pub agent: Pad,
    pub cpu: Pad,
}

impl Pads {
    pub const NEUTRAL: Pads = Pads { agent: Pad::NEUTRAL, cpu: Pad::NEUTRAL };
    fn agent(agent: Pad) -> Pads {
        Pads { agent, cpu: Pad::NEUTRAL }
    }
}

/// The menu steps, in the order a fresh start meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// A scene the navigator does not act on (boot, memory-card prompt, loading).
    WaitingForMenus,
    TitleScreen,
    MainMenu,
    QuitMatch,
    Results,
    AgentCoin,
    AgentToggle,
    CpuCoin,
    CpuToggle,
    CpuLevel,
    OpponentCoin,
    OpponentToggle,
    Start,
    StageSelect,
    MatchStart,
    /// Against a person: waiting for their coin on a character.
    PersonCoin,
    /// Against a person: no input from their port for a minute (their hand has not
    /// moved): their controller may be in another port.
    PersonSilent,
    /// Against a person: their slot is a CPU or closed, and only they can set it back.
    PersonSlot,
    /// Against a person: Melee sees no controller in their port (the hand's state 3,
    /// at once; it also turns a human slot to CPU when its controller is unplugged).
    PersonUnplugged,
    /// Against a person: both coins down, waiting for them to press START.
    PersonStart,
    /// Against a person: waiting for them to pick the stage.
    PersonStage,
    /// The match on screen has the opponent's port played by another kind than set up
    /// (against a person or an opponent bot: Melee's CPU, their slot not HMN when the
    /// match started; against the CPU: a human slot); quitting it, uncounted.
    QuitCpuMatch,
    /// The match on screen has the bot's port played by Melee's CPU (a hand pressed
    /// the bot's HMN/CPU toggle and START followed); quitting it, uncounted.
    QuitBotCpuMatch,
}

impl Task {
    pub fn what(self) -> &'static str {
        match self {
            Task::WaitingForMenus => "waiting for the title screen or a menu",
            Task::TitleScreen => "title screen: pressing START",
            Task::MainMenu => "main menu: choosing VS mode, then Melee",
            Task::QuitMatch => "quitting the played match (L+R+A+START, pressed and released until it quits)",
            Task::Results => "results screens: START back to character select",
            Task::AgentCoin => "character select: the bot's hand placing its coin",
            Task::AgentToggle => "character select: the bot's hand switching its own port back to human (HMN)",
            Task::CpuCoin => "character select: the CPU port's hand placing its coin",
            Task::CpuToggle => "character select: the CPU port's hand switching its port to CPU",
            Task::CpuLevel => "character select: the CPU port's hand setting the level slider",
            Task::OpponentCoin => "character select: the opponent bot's hand placing its coin",
            Task::OpponentToggle => "character select: the opponent bot's hand switching its own port to human (HMN)",
            Task::Start => "character select: START once the ready banner shows",
            Task::StageSelect => "stage select: moving to the stage, A",
            Task::MatchStart => "waiting for both fighters to enter the match",
            Task::PersonCoin => "character select: waiting for you to put your coin on a character",
            Task::PersonSilent => "character select: no input from your port for a minute",
            Task::PersonSlot => "character select: your slot is not a human (HMN) one",
            Task::PersonUnplugged => "character select: no controller in your port",
            Task::PersonStart => "character select: waiting for you to press START (change character first if you like)",
            Task::PersonStage => "stage select: waiting for you to pick a stage",
            Task::QuitCpuMatch => {
                "the opponent's port was not played as set up (a person's or an opponent bot's as Melee's CPU): quitting that match (it is not counted)"
            }
            Task::QuitBotCpuMatch => "the bot's port played as Melee's CPU (its slot was not HMN): quitting that match (it is not counted)",
        }
    }

    /// Whether this step waits for a person, who takes as long as they like: no
    /// budget, and no message that calls it stuck.
    pub fn waits_for_person(self) -> bool {
        matches!(self, Task::PersonCoin | Task::PersonSilent | Task::PersonSlot | Task::PersonUnplugged | Task::PersonStart | Task::PersonStage)
    }

    /// What to check when this step gets stuck.
    pub fn check(self) -> &'static str {
        match self {
            Task::WaitingForMenus => "the image must be Melee NTSC 1.02 with the user folder's boot-to-character-select code (GameSettings/GALE01.ini); the scene byte is 0x80479D30",
            Task::TitleScreen => "START must reach the game: Config/GCPadNew.ini maps the bot's port to its pipe, and Dolphin.ini gives that port a standard controller (SIDevice = 6)",
            Task::MainMenu => "the submenu byte 0x804A04F0 and the selection byte 0x804A04F3 (VS mode is item 1 of submenu 0, Melee item 0 of submenu 2)",
            Task::QuitMatch => "pause must be on in the match rules (the quit needs it); the pad reaches the game (doctor's pipe check)",
            Task::Results => "START must reach the game on the bot's port",
            Task::AgentCoin | Task::CpuCoin | Task::OpponentCoin => {
                "the hand pointer 0x804A0BC0 + 4 per port (state at +5, what it grabs at +6, x/y at +0x0C/+0x10), the slot's character byte 0x803F0E0A + 0x24 per port (icon order, 0x19 none), and the icon grid in characters.rs; all characters must be unlocked"
            }
            Task::AgentToggle | Task::CpuToggle | Task::OpponentToggle => {
                "the slot type byte 0x803F0E07 + 0x24 per port (0 human, 1 CPU, 3 off) and the HMN/CPU toggle position in css.rs; the toggle ignores a hand that grabs something; the CPU port needs its own pipe"
            }
            Task::CpuLevel => "the level byte 0x8048082F + 0x24 per port, the hand's grab byte (+6: 4 + port while it holds that port's slider), and the slider position in css.rs",
            Task::Start => "the ready banner byte 0x804D6CF2 (0 = shown): it shows once every open slot has a character and no hand grabs anything",
            Task::StageSelect => "the stage cursor chain *(*(*(0x804D7820)+0x10)+0x28)+0x38/+0x3C and Final Destination's position in css.rs",
            Task::MatchStart => "the fighter pointers at the static player blocks (+0xB0) and the action state (+0x70)",
            Task::PersonCoin | Task::PersonStart | Task::PersonStage => "nothing: this waits for the person",
            Task::PersonSilent => {
                "that the controller is in the adapter's port with the game port's number (Dolphin reads the adapter's port N for game port N), or, with a mapped pad, that its profile names the device Dolphin sees"
            }
            Task::PersonSlot => "that your hand presses your slot's HMN/CPU toggle until it reads HMN",
            Task::PersonUnplugged => {
                "that a controller is in the adapter's port with the game port's number (Dolphin reads the adapter's port N for game port N); the hand's state byte (+5) reads 3 while none is"
            }
            Task::QuitCpuMatch | Task::QuitBotCpuMatch => "the static player block's slot type (+0x08: 0 human, 1 CPU)",
        }
    }

    /// Frames this step may take before it is called stuck (60 a second); `None` for a
    /// step that waits for a person.
    pub fn budget(self) -> Option<u64> {
        match self {
            _ if self.waits_for_person() => None,
            Task::WaitingForMenus => Some(60 * 60),
            Task::Results | Task::MatchStart => Some(60 * 30),
            _ => Some(60 * 20),
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what())
    }
}

/// One frame's decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MenuStep {
    /// Hold these pads for one frame, then ask again.
    Press(Pads, Task),
    /// A fresh match runs with the characters asked: hand over to the bot.
    Done,
}

#[derive(Debug, Error)]
pub enum MenuError {
    #[error("reading Melee's RAM: {0}")]
    Ram(#[from] RamError),
    #[error("menu step \"{task}\" made no progress in {frames} frames. RAM said: {ram}. Check {}", task.check())]
    Stuck { task: Task, frames: u64, ram: String },
    #[error(
        "the match started with the wrong characters: the bot's port plays {agent}, the CPU's plays {cpu} (fighter +0x64); wanted {want_agent} and {want_cpu}. Check the icon grid in characters.rs against your disc (all characters must be unlocked)"
    )]
    WrongCharacters { agent: String, cpu: String, want_agent: Character, want_cpu: Character },
}

/// A one-line account of what RAM says, for errors and `doctor` (ports counted from 1,
/// as the game shows them).
pub fn describe_ram(ram: RamView, goal: &MenuGoal) -> String {
    let (major, minor) = match css::scene(ram) {
        Ok(s) => s,
        Err(e) => return format!("unreadable ({e})"),
    };
    let mut out = format!("scene {major}/{minor}");
    let port_line = |name: &str, p: usize| -> String {
        let n = p + 1;
        match css::port(ram, p) {
            Ok(v) => {
                let hand = v.hand.map_or("no hand".to_string(), |(x, y)| format!("hand ({x:.1}, {y:.1})"));
                format!(
                    "; {name} port {n}: {hand} {:?}{}, slot {:?}, icon {:#04x}{}, CPU level {}{}",
                    v.state,
                    v.grab.map_or(String::new(), |g| format!(" ({g:?})")),
                    v.slot,
                    v.icon,
                    Character::by_icon(v.icon).map_or(String::new(), |c| format!(" ({c})")),
                    v.cpu_level,
                    if v.holding_slider { ", its slider held" } else { "" }
                )
            }
            Err(e) => format!("; {name} port {n}: unreadable ({e})"),
        }
    };
    match (major, minor) {
        (scene::MAJOR_MAIN_MENU, _) => {
            let b = |a| ram.u8(a).map_or("?".to_string(), |v| v.to_string());
            out += &format!("; submenu {}, selection {}", b(css::main_menu::SUBMENU), b(css::main_menu::SELECTION));
        }
        (scene::MAJOR_VS, scene::CSS) => {
            out += &port_line("bot", goal.agent_port);
            out += &port_line(goal.opponent.name(), goal.opponent_port);
            out += &format!("; ready banner {}", ram.u8(css::READY_BANNER).map_or("?".to_string(), |v| v.to_string()));
        }
        (scene::MAJOR_VS, scene::STAGE_SELECT) => {
            out += &match css::stage_cursor(ram) {
                Ok(Some((x, y))) => format!("; stage cursor ({x:.1}, {y:.1})"),
                Ok(None) => "; no stage cursor".to_string(),
                Err(e) => format!("; stage cursor unreadable ({e})"),
            };
        }
        (scene::MAJOR_VS, scene::IN_GAME | scene::SUDDEN_DEATH) => {
            for (name, p) in [("bot", goal.agent_port), (goal.opponent.name(), goal.opponent_port)] {
                let n = p + 1;
                out += &match ram.player(p).and_then(|pl| pl.fighter()) {
                    Ok(Some(f)) => {
                        let id = f.internal_character().unwrap_or(u32::MAX);
                        let slot = ram.player(p).and_then(|pl| pl.slot_type()).map_or("?".to_string(), |k| k.to_string());
                        format!(
                            "; {name} port {n}: {} (internal {id:#04x}), action {:#x}, slot type {slot}",
                            describe(Character::by_internal(id), id),
                            f.action_state().unwrap_or(u32::MAX)
                        )
                    }
                    _ => format!("; {name} port {n}: no fighter"),
                };
            }
        }
        _ => {}
    }
    out
}

/// Decides the pads of each frame until a fresh match runs. Keep one per `reset`.
#[derive(Debug, Clone)]
pub struct Navigator {
    goal: MenuGoal,
    /// We played in the match on screen: it must be quit, not reused.
    quit_current: bool,
    /// What the quit of the match on screen is reported as: [`Task::QuitMatch`] for a
    /// match played, or the slot check that refused it.
    quit_task: Task,
    /// Frames since the navigator started (taps alternate press and release on it).
    t: u64,
    /// The step of the last frame, and for how many frames it has been the step.
    task: Option<Task>,
    on_task: u64,
    /// Against a person: where their hand was last frame (`None`: not on screen), and
    /// for how many frames it has not moved.
    person_hand: Option<(f32, f32)>,
    person_still: u64,
}

/// Frames without a move of the person's hand after which they are told their
/// controller may be in the wrong port (a minute).
pub const PERSON_SILENT_FRAMES: u64 = 60 * 60;

impl Navigator {
    pub fn new(goal: MenuGoal, quit_current: bool) -> Self {
        Navigator { goal, quit_current, quit_task: Task::QuitMatch, t: 0, task: None, on_task: 0, person_hand: None, person_still: 0 }
    }

    pub fn goal(&self) -> &MenuGoal {
        &self.goal
    }

    /// Press on even frames, release on odd ones: menus act on the press.
    fn tap(&self, pad: Pad) -> Pad {
        if self.t.is_multiple_of(2) {
            pad
        } else {
            Pad::NEUTRAL
        }
    }

    pub fn next(&mut self, ram: RamView) -> Result<MenuStep, MenuError> {
        let (major, minor) = css::scene(ram)?;
        let step = match (major, minor) {
            (scene::MAJOR_TITLE, _) => MenuStep::Press(Pads::agent(self.tap(Pad::NEUTRAL.with(Button::Start))), Task::TitleScreen),
            (scene::MAJOR_MAIN_MENU, _) => self.main_menu(ram)?,
            (scene::MAJOR_VS, scene::CSS) => {
                // Whatever was on screen is gone.
                (self.quit_current, self.quit_task) = (false, Task::QuitMatch);
                self.character_select(ram)?
            }
            // The person picks the stage.
            (scene::MAJOR_VS, scene::STAGE_SELECT) if self.goal.opponent == Opponent::Human => MenuStep::Press(Pads::NEUTRAL, Task::PersonStage),
            (scene::MAJOR_VS, scene::STAGE_SELECT) => self.stage_select(ram)?,
            (scene::MAJOR_VS, scene::IN_GAME | scene::SUDDEN_DEATH) => self.in_game(ram)?,
            (scene::MAJOR_VS, scene::POSTGAME) => MenuStep::Press(Pads::agent(self.tap(Pad::NEUTRAL.with(Button::Start))), Task::Results),
            _ => MenuStep::Press(Pads::NEUTRAL, Task::WaitingForMenus),
        };
        if let MenuStep::Press(_, task) = step {
            if self.task == Some(task) {
                self.on_task += 1;
                if task.budget().is_some_and(|budget| self.on_task > budget) {
                    return Err(MenuError::Stuck { task, frames: self.on_task, ram: describe_ram(ram, &self.goal) });
                }
            } else {
                (self.task, self.on_task) = (Some(task), 0);
            }
        }
        self.t += 1;
        Ok(step)
    }

    /// libmelee's `choose_versus_mode`: release every other frame; on the top menu go
    /// down to VS mode and press A, in the VS submenu to Melee and press A, elsewhere B.
    fn main_menu(&self, ram: RamView) -> Result<MenuStep, MenuError> {
        use css::main_menu::*;
        let pad = if !self.t.is_multiple_of(2) {
            Pad::NEUTRAL
        } else {
            let (sub, sel) = (ram.u8(SUBMENU)?, ram.u8(SELECTION)?);
            match sub {
                TOP if sel == TOP_VS_MODE => Pad::NEUTRAL.with(Button::A),
                VS if sel == VS_MELEE => Pad::NEUTRAL.with(Button::A),
                TOP | VS => Pad::NEUTRAL.with_main(0.5, 0.0),
                _ => Pad::NEUTRAL.with(Button::B),
            }
        };
        Ok(MenuStep::Press(Pads::agent(pad), Task::MainMenu))
    }

    fn in_game(&mut self, ram: RamView) -> Result<MenuStep, MenuError> {
        let g = self.goal;
        if !self.quit_current {
            // A match whose ports are played by other kinds than set up is not the
            // match asked for: anyone's hand can press any slot's HMN/CPU toggle, and
            // START may follow at once (Melee's CPU then plays the bot's port, or the
            // person's). It is quit, and the walk goes on from character select, where
            // the slots are set again (and a person is told).
            if let Some(task) = self.wrong_slot(ram)? {
                (self.quit_current, self.quit_task) = (true, task);
            }
        }
        if self.quit_current {
            // The paper's quit: all four pressed, then all released, over and over. The
            // first press pauses (a press the game misses costs one more round); a press
            // while paused quits. Melee takes the pause from any controller whose port
            // holds a fighter, a CPU's included (the decompilation's
            // `gm_DefaultVSGetPauser`), so the bot's pipe quits even a match in which
            // the CPU plays its port.
            let quit = Pad::NEUTRAL.with(Button::L).with(Button::R).with(Button::A).with(Button::Start).with_l(1.0);
            return Ok(MenuStep::Press(Pads::agent(self.tap(quit)), self.quit_task));
        }
        // Fresh when both fighters exist and the bot is past the entry animation.
        let fighters = [g.agent_port, g.opponent_port].map(|p| ram.player(p).and_then(|pl| pl.fighter()));
        if let [Ok(Some(me)), Ok(Some(cpu))] = fighters {
            let a = me.action_state()?;
            if !(action::ENTRY..=action::ENTRY_END).contains(&a) {
                let (mine, theirs) = (me.internal_character()?, cpu.internal_character()?);
                // A person plays whom they picked; a CPU must be the one asked.
                let theirs_ok = g.opponent == Opponent::Human || theirs == u32::from(g.cpu_character.internal);
                if mine != u32::from(g.agent_character.internal) || !theirs_ok {
                    return Err(MenuError::WrongCharacters {
                        agent: describe(Character::by_internal(mine), mine),
                        cpu: describe(Character::by_internal(theirs), theirs),
                        want_agent: g.agent_character,
                        want_cpu: g.cpu_character,
                    });
                }
                return Ok(MenuStep::Done);
            }
        }
        Ok(MenuStep::Press(Pads::NEUTRAL, Task::MatchStart))
    }

    /// Whether the match on screen has a port played by another kind than the goal
    /// sets up (the static player block's slot type, once both fighters exist): the
    /// quit step that says which, or `None`.
    fn wrong_slot(&self, ram: RamView) -> Result<Option<Task>, MenuError> {
        let g = self.goal;
        let kind = |p: usize| -> Result<Option<u32>, RamError> {
            let player = ram.player(p)?;
            Ok(if player.fighter()?.is_some() { Some(player.slot_type()?) } else { None })
        };
        let (Some(bot), Some(theirs)) = (kind(g.agent_port)?, kind(g.opponent_port)?) else { return Ok(None) };
        let human = u32::from(SlotType::Human.byte());
        let want_theirs = if g.opponent == Opponent::Cpu { u32::from(SlotType::Cpu.byte()) } else { human };
        Ok(if bot != human {
            Some(Task::QuitBotCpuMatch)
        } else if theirs != want_theirs {
            Some(Task::QuitCpuMatch)
        } else {
            None
        })
    }

    fn stage_select(&self, ram: RamView) -> Result<MenuStep, MenuError> {
        // The screen ignores input while it fades in (libmelee waits 20 frames).
        let Some(at) = css::stage_cursor(ram)?.filter(|_| self.on_screen_frames(Task::StageSelect) >= 20) else {
            return Ok(MenuStep::Press(Pads::NEUTRAL, Task::StageSelect));
        };
        let pad = match steer(at, self.goal.stage, css::WIGGLE) {
            Some(pad) => pad,
            None => self.tap(Pad::NEUTRAL.with(Button::A)),
        };
        Ok(MenuStep::Press(Pads::agent(pad), Task::StageSelect))
    }

    /// Frames the navigator has spent on `task` so far (0 when it is a new one).
    fn on_screen_frames(&self, task: Task) -> u64 {
        if self.task == Some(task) {
            self.on_task + 1
        } else {
            0
        }
    }

    fn character_select(&mut self, ram: RamView) -> Result<MenuStep, MenuError> {
        let g = self.goal;
        let me = css::port(ram, g.agent_port)?;
        // Each hand works on its own; the step reported is the first one not done.
        let agent = self.bot_slot(me, g.agent_port, g.agent_character);
        let cpu_step = match g.opponent {
            Opponent::Cpu => self.cpu_slot(css::port(ram, g.opponent_port)?, g.opponent_port),
            Opponent::Human => {
                // Their hand is theirs, and so is START: the bot's hand only sets up its
                // own slot, then waits for them as long as they take.
                let person = self.person_step(css::port(ram, g.opponent_port)?);
                return Ok(MenuStep::Press(Pads::agent(agent.map_or(Pad::NEUTRAL, |a| a.0)), agent.map_or(person, |a| a.1)));
            }
            Opponent::Bot => self.bot_slot(css::port(ram, g.opponent_port)?, g.opponent_port, g.cpu_character).map(|(pad, task)| {
                (pad, if task == Task::AgentToggle { Task::OpponentToggle } else { Task::OpponentCoin })
            }),
        };
        let pads = Pads { agent: agent.map_or(Pad::NEUTRAL, |a| a.0), cpu: cpu_step.map_or(Pad::NEUTRAL, |c| c.0) };
        Ok(match (agent, cpu_step) {
            (Some((_, task)), _) | (None, Some((_, task))) => MenuStep::Press(pads, task),
            (None, None) => {
                // The banner shows once every open slot has a character and no hand
                // grabs anything.
                let ready = ram.u8(css::READY_BANNER)? == css::READY_SHOWN;
                let start = if ready { self.tap(Pad::NEUTRAL.with(Button::Start)) } else { Pad::NEUTRAL };
                MenuStep::Press(Pads::agent(start), Task::Start)
            }
        })
    }

    /// What the navigator waits for from the person (the bot's own slot done): a
    /// controller in their port, their slot a human one, their coin down, then their
    /// START. Melee marks a port with no controller at once (the hand's state 3, and a
    /// human slot turned to CPU): that is said first, since only plugging in helps. A
    /// hand that has not moved for [`PERSON_SILENT_FRAMES`] before their coin is down
    /// is reported as [`Task::PersonSilent`] (a mapped pad whose device Dolphin does
    /// not see shows so: a controller is there, and no hand moves).
    fn person_step(&mut self, v: PortView) -> Task {
        // The minute of a still hand starts once a controller is plugged in.
        if v.state == HandState::Unplugged {
            self.person_still = 0;
        } else if v.hand == self.person_hand {
            self.person_still += 1;
        } else {
            (self.person_hand, self.person_still) = (v.hand, 0);
        }
        let coin_down = v.icon != css::NO_ICON && !matches!(v.grab, Some(Grab::Coin(_)));
        match v.slot {
            _ if v.state == HandState::Unplugged => Task::PersonUnplugged,
            SlotType::Cpu => Task::PersonSlot,
            SlotType::Human if coin_down => Task::PersonStart,
            _ if self.person_still >= PERSON_SILENT_FRAMES => Task::PersonSilent,
            _ => Task::PersonCoin,
        }
    }

    /// The bot's hand: its coin down on the bot's character, its own port a human one.
    fn bot_slot(&self, v: PortView, port: usize, who: Character) -> Option<(Pad, Task)> {
        // A coin in hand goes down first: the toggle ignores a hand that grabs.
        if !matches!(v.grab, Some(Grab::Coin(_))) && v.slot != SlotType::Human {
            return Some((self.press_toggle(v, port), Task::AgentToggle));
        }
        self.place_coin(v, who).map(|pad| (pad, Task::AgentCoin))
    }

    /// The CPU port's own hand: its slider let go of, its coin down on the CPU's
    /// character, its port a CPU, then the level, read back each frame.
    fn cpu_slot(&self, v: PortView, port: usize) -> Option<(Pad, Task)> {
        let level = self.goal.cpu_level;
        if v.holds_own_slider(port) {
            // libmelee drags with a light tilt and lets go once the level reads right.
            // Until A lets go the hand "grabs", so nothing else may happen first: its
            // coin is down, and steering toward the grid would drag the slider.
            let pad = match v.cpu_level.cmp(&level) {
                std::cmp::Ordering::Greater => Pad::NEUTRAL.with_main(0.35, 0.5),
                std::cmp::Ordering::Less => Pad::NEUTRAL.with_main(0.65, 0.5),
                std::cmp::Ordering::Equal => self.tap(Pad::NEUTRAL.with(Button::A)),
            };
            return Some((pad, Task::CpuLevel));
        }
        if matches!(v.grab, Some(Grab::Other(_))) {
            // Some other slider (handicap): A lets go.
            return Some((self.tap(Pad::NEUTRAL.with(Button::A)), Task::CpuLevel));
        }
        if let Some(pad) = self.place_coin(v, self.goal.cpu_character) {
            return Some((pad, Task::CpuCoin));
        }
        if v.slot != SlotType::Cpu {
            return Some((self.press_toggle(v, port), Task::CpuToggle));
        }
        if v.cpu_level != level {
            let at = v.hand?;
            let token = css::slider_token(port, v.cpu_level);
            let pad = steer(at, token, css::WIGGLE_FINE).unwrap_or_else(|| self.tap(Pad::NEUTRAL.with(Button::A)));
            return Some((pad, Task::CpuLevel));
        }
        None
    }

    /// The pad that brings this port's coin onto `who`, or `None` once it is down there.
    fn place_coin(&self, v: PortView, who: Character) -> Option<Pad> {
        if v.coin_down_on(who.icon) {
            return None;
        }
        let Some(at) = v.hand else { return Some(Pad::NEUTRAL) }; // not on screen yet
        let target = who.icon_centre();
        Some(match steer(at, target, css::WIGGLE) {
            Some(pad) => pad,
            // Over the icon with the coin in hand: A puts it down. With an open hand
            // (its coin down elsewhere), B calls its own coin back first (libmelee's
            // way; B is only tapped, since held it leaves the screen).
            None if matches!(v.grab, Some(Grab::Coin(_))) => self.tap(Pad::NEUTRAL.with(Button::A)),
            None => self.tap(Pad::NEUTRAL.with(Button::B)),
        })
    }

    /// Steer a port's hand to that port's HMN/CPU toggle and tap A there.
    fn press_toggle(&self, v: PortView, port: usize) -> Pad {
        let Some(at) = v.hand else { return Pad::NEUTRAL };
        steer(at, css::toggle(port), css::WIGGLE_FINE).unwrap_or_else(|| self.tap(Pad::NEUTRAL.with(Button::A)))
    }
}

/// Steer a hand at `at` toward `target`: a stick tilted in proportion to the distance
/// (the paper's `menu_manager.py`: 0.5 + 0.5 d / (|d| + 1) per axis), so a Dolphin
/// that runs several frames per pad does not overshoot; `None` once within `wiggle`
/// on both axes.
fn steer(at: (f32, f32), target: (f32, f32), wiggle: f32) -> Option<Pad> {
    let (dx, dy) = (target.0 - at.0, target.1 - at.1);
    if dx.abs() < wiggle && dy.abs() < wiggle {
        return None;
    }
    let mag = (dx * dx + dy * dy).sqrt();
    Some(Pad::NEUTRAL.with_main(0.5 + 0.5 * dx / (mag + 1.0), 0.5 + 0.5 * dy / (mag + 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::melee::characters::{FOX, LUIGI, MARTH};
    use crate::ram::{addr, static_player, RamMut};

    /// A synthetic MEM1 image holding just the fields the navigator reads.
    struct Screenshot {
        mem: Vec<u8>,
    }

    const HANDS: u32 = 0x8110_0000;
    const SSS_BLOCK: u32 = 0x8070_1000;
    const FIGHTERS: [u32; 2] = [0x8071_0000, 0x8072_0000];

    impl Screenshot {
        fn new(major: u8, minor: u8) -> Self {
            let mut s = Screenshot { mem: vec![0; addr::MEM1_SIZE] };
            let mut w = s.w();
            w.set_u8(addr::SCENE, major).unwrap();
            w.set_u8(addr::MENU, minor).unwrap();
            for p in 0..4 {
                w.set_u32(css::hand_ptr_addr(p), HANDS + 0x100 * p as u32).unwrap();
            }
            w.set_u8(css::READY_BANNER, css::READY_HIDDEN).unwrap();
            w.set_u32(css::SSS_ROOT, SSS_BLOCK).unwrap();
            w.set_u32(SSS_BLOCK + 0x10, SSS_BLOCK + 0x100).unwrap();
            w.set_u32(SSS_BLOCK + 0x100 + 0x28, SSS_BLOCK + 0x200).unwrap();
            s
        }
        fn css() -> Self {
            Screenshot::new(scene::MAJOR_VS, scene::CSS)
        }
        fn w(&mut self) -> RamMut<'_> {
            RamMut::mem1(&mut self.mem)
        }
        fn view(&self) -> RamView<'_> {
            RamView::mem1(&self.mem)
        }
        /// A port's hand at (x, y) doing `h`, its bytes as the decompilation sets them:
        /// 1 while it grabs (+6 says what), else 2 over the grid's band and 0 elsewhere.
        fn hand(&mut self, port: usize, (x, y): (f32, f32), h: H) -> &mut Self {
            let a = HANDS + 0x100 * port as u32;
            let (state, grab) = match h {
                H::Coin => (HandState::Grabbing, Grab::Coin(port)),
                H::Slider => (HandState::Grabbing, Grab::CpuSlider(port)),
                H::Open if (0.2..=22.0).contains(&y) => (HandState::OverGrid, Grab::Coin(0)),
                H::Open => (HandState::Open, Grab::Coin(0)),
                H::Unplugged => (HandState::Unplugged, Grab::Coin(0)),
            };
            self.w().set_f32(a + css::HAND_X, x).unwrap();
            self.w().set_f32(a + css::HAND_Y, y).unwrap();
            self.w().set_u8(a + css::HAND_STATE, state.byte()).unwrap();
            self.w().set_u8(a + css::HAND_GRAB, grab.byte()).unwrap();
            self.w().set_u8(css::slot_addr(port, css::SLOT_HOLDING_SLIDER), (h == H::Slider) as u8).unwrap();
            self
        }
        /// A port's slot: what plays it (`p_kind` and `p_kind_prev`), the character
        /// its coin is down on, the CPU level.
        fn slot(&mut self, port: usize, kind: SlotType, icon: u8, level: u8) -> &mut Self {
            self.w().set_u8(css::slot_addr(port, css::SLOT_TYPE), kind.byte()).unwrap();
            self.w().set_u8(css::slot_addr(port, css::SLOT_TYPE_PREV), kind.byte()).unwrap();
            self.w().set_u8(css::slot_addr(port, css::SLOT_ICON), icon).unwrap();
            self.w().set_u8(css::level_addr(port), level).unwrap();
            self
        }
        fn stage_cursor(&mut self, x: f32, y: f32) -> &mut Self {
            self.w().set_f32(SSS_BLOCK + 0x200 + css::SSS_X, x).unwrap();
            self.w().set_f32(SSS_BLOCK + 0x200 + css::SSS_Y, y).unwrap();
            self
        }
        /// Both fighters in the match, the bot's (port 1, MenuGoal's default) in
        /// `agent_action`; the ports played as the default goal sets them up (the bot's
        /// human, port 0 a CPU: [`Screenshot::kinds`] changes that).
        fn fighters(&mut self, agent_action: u32, ids: [Character; 2]) -> &mut Self {
            self.kinds(SlotType::Human, SlotType::Cpu);
            for (port, e) in FIGHTERS.iter().enumerate() {
                let b = crate::ram::static_block(port);
                let who = if port == 1 { ids[0] } else { ids[1] };
                self.w().set_u32(b + static_player::FIGHTER_PTR, *e).unwrap();
                self.w().set_u32(e + crate::ram::fighter::INTERNAL_CHARACTER, u32::from(who.internal)).unwrap();
                self.w().set_u32(e + crate::ram::fighter::ACTION_STATE, if port == 1 { agent_action } else { action::WAIT }).unwrap();
            }
            self
        }
        /// What plays each port in the match (the static player block's slot type):
        /// the bot's (port 1) and its opponent's (port 0).
        fn kinds(&mut self, bot: SlotType, theirs: SlotType) -> &mut Self {
            for (port, kind) in [(1, bot), (0, theirs)] {
                self.w().set_u32(crate::ram::static_block(port) + static_player::SLOT_TYPE, u32::from(kind.byte())).unwrap();
            }
            self
        }
    }

    /// What a hand does.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum H {
        /// Grabs its own coin.
        Coin,
        /// Grabs its own CPU-level slider.
        Slider,
        /// Holds nothing.
        Open,
        /// Its controller is unplugged (the hand hidden, state 3).
        Unplugged,
    }
    const NONE: u8 = css::NO_ICON;

    fn press(step: MenuStep) -> (Pads, Task) {
        match step {
            MenuStep::Press(p, t) => (p, t),
            MenuStep::Done => panic!("expected a press, got Done"),
        }
    }
    /// Two consecutive decisions (taps alternate press and release).
    fn two(nav: &mut Navigator, s: &Screenshot) -> [(Pads, Task); 2] {
        [press(nav.next(s.view()).unwrap()), press(nav.next(s.view()).unwrap())]
    }
    fn tapped(steps: &[(Pads, Task); 2], b: Button, agent: bool) -> bool {
        let on = |p: &Pads| if agent { p.agent.pressed(b) } else { p.cpu.pressed(b) };
        on(&steps[0].0) != on(&steps[1].0)
    }
    fn goal() -> MenuGoal {
        MenuGoal::default()
    }

    #[test]
    fn a_fresh_match_with_the_right_characters_is_done_and_the_entry_animation_waits() {
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        s.fighters(action::ENTRY_START, [FOX, MARTH]);
        let mut nav = Navigator::new(goal(), false);
        assert_eq!(press(nav.next(s.view()).unwrap()), (Pads::NEUTRAL, Task::MatchStart));
        s.fighters(action::WAIT, [FOX, MARTH]);
        assert_eq!(nav.next(s.view()).unwrap(), MenuStep::Done);
        // No fighters yet (pointers null): wait, do not hand over.
        let s2 = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        assert_ne!(Navigator::new(goal(), false).next(s2.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn the_wrong_characters_in_game_are_an_error_naming_them() {
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        s.fighters(action::WAIT, [LUIGI, characters::FALCO]);
        let err = Navigator::new(goal(), false).next(s.view()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, MenuError::WrongCharacters { .. }), "{msg}");
        assert!(msg.contains("plays Luigi") && msg.contains("plays Falco") && msg.contains("wanted Fox and Marth"), "{msg}");
    }

    #[test]
    fn a_played_match_is_quit_by_pressing_and_releasing_all_four_until_the_scene_changes() {
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        s.fighters(action::WAIT, [FOX, MARTH]);
        let mut nav = Navigator::new(goal(), true);
        for round in 0..5 {
            let [(a, t), (b, _)] = two(&mut nav, &s);
            assert_eq!(t, Task::QuitMatch);
            for button in [Button::L, Button::R, Button::A, Button::Start] {
                assert!(a.agent.pressed(button), "round {round}: {button:?} pressed");
                assert!(!b.agent.pressed(button), "round {round}: {button:?} released");
            }
        }
        // Once on character select, the old match is gone: a later in-game is fresh.
        let css_shot = Screenshot::css();
        nav.next(css_shot.view()).unwrap();
        assert_eq!(nav.next(s.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn results_and_title_tap_start() {
        for (major, minor, task) in [(scene::MAJOR_VS, scene::POSTGAME, Task::Results), (scene::MAJOR_TITLE, 0, Task::TitleScreen)] {
            let s = Screenshot::new(major, minor);
            let steps = two(&mut Navigator::new(goal(), false), &s);
            assert!(tapped(&steps, Button::Start, true), "{task:?}");
            assert_eq!(steps[0].1, task);
        }
    }

    #[test]
    fn the_main_menu_is_walked_to_vs_mode_then_melee() {
        use css::main_menu::*;
        let mut s = Screenshot::new(scene::MAJOR_MAIN_MENU, 0);
        let mut nav = Navigator::new(goal(), false);
        let set = |s: &mut Screenshot, sub: u8, sel: u8| {
            s.w().set_u8(SUBMENU, sub).unwrap();
            s.w().set_u8(SELECTION, sel).unwrap();
        };
        set(&mut s, TOP, 0);
        let [(a, _), (b, _)] = two(&mut nav, &s);
        assert_eq!((a.agent.main.y, b.agent), (0.0, Pad::NEUTRAL), "down, then let go");
        set(&mut s, TOP, TOP_VS_MODE);
        assert!(two(&mut nav, &s)[0].0.agent.pressed(Button::A), "A on VS mode");
        set(&mut s, VS, VS_MELEE);
        assert!(two(&mut nav, &s)[0].0.agent.pressed(Button::A), "A on Melee");
        set(&mut s, 8, 0);
        assert!(two(&mut nav, &s)[0].0.agent.pressed(Button::B), "B out of any other submenu");
    }

    #[test]
    fn the_bot_places_its_coin_on_fox_by_icon_order_not_by_external_id() {
        let mut s = Screenshot::css();
        s.hand(1, (0.0, 0.0), H::Coin).slot(1, SlotType::Human, NONE, 0);
        let mut nav = Navigator::new(goal(), false);
        let (pads, task) = press(nav.next(s.view()).unwrap());
        assert_eq!(task, Task::AgentCoin);
        let fox = FOX.icon_centre();
        assert!(pads.agent.main.x < 0.5 && pads.agent.main.y > 0.5, "toward Fox at {fox:?}: {:?}", pads.agent.main);
        // Over Luigi (the icon at Fox's external id 0x02): not there yet.
        s.hand(1, LUIGI.icon_centre(), H::Coin);
        let (pads, _) = press(nav.next(s.view()).unwrap());
        assert!(pads.agent.main.x < 0.5, "Luigi is not Fox: keep moving left");
        s.hand(1, fox, H::Coin);
        assert!(tapped(&two(&mut nav, &s), Button::A, true), "A on Fox");
        // Coin down on the wrong one, an open hand over Fox: B calls the coin back.
        s.hand(1, fox, H::Open).slot(1, SlotType::Human, LUIGI.icon, 0);
        assert!(tapped(&two(&mut nav, &s), Button::B, true));
        // Done: Fox with the coin down.
        s.slot(1, SlotType::Human, FOX.icon, 0);
        let [(_, task), _] = two(&mut nav, &s);
        assert_ne!(task, Task::AgentCoin);
    }

    #[test]
    fn the_cpu_port_uses_its_own_hand_coin_then_toggle_then_slider_read_back() {
        let g = goal();
        let mut s = Screenshot::css();
        // The bot is set; the CPU port is a human with its coin in hand.
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, MARTH.icon_centre(), H::Coin).slot(0, SlotType::Human, NONE, 0);
        let mut nav = Navigator::new(g, false);
        let steps = two(&mut nav, &s);
        assert_eq!(steps[0].1, Task::CpuCoin);
        assert!(tapped(&steps, Button::A, false), "A on the CPU's own pad");
        assert!(!steps[0].0.agent.pressed(Button::A) && !steps[1].0.agent.pressed(Button::A), "the bot's hand stays still");
        // Coin placed on Marth; the hand goes to its own toggle. Off the grid's band the
        // hand's state reads 0 (an open hand), and the coin is still down.
        s.hand(0, (0.0, -5.0), H::Open).slot(0, SlotType::Human, MARTH.icon, 0);
        let (pads, task) = press(nav.next(s.view()).unwrap());
        assert_eq!(task, Task::CpuToggle);
        assert!(pads.cpu.main.x < 0.5, "left toward port 0's toggle");
        s.hand(0, css::toggle(0), H::Open);
        let steps = two(&mut nav, &s);
        assert!(tapped(&steps, Button::A, false), "A on the toggle");
        // CPU now, level 3: grab the token where level 3 puts it.
        s.slot(0, SlotType::Cpu, MARTH.icon, 3);
        let (_, task) = press(nav.next(s.view()).unwrap());
        assert_eq!(task, Task::CpuLevel);
        s.hand(0, css::slider_token(0, 3), H::Open);
        assert!(tapped(&two(&mut nav, &s), Button::A, false), "grab the slider");
        // Holding: drag right until the byte reads 9, then let go.
        s.hand(0, css::slider_token(0, 5), H::Slider).slot(0, SlotType::Cpu, MARTH.icon, 5);
        assert_eq!(press(nav.next(s.view()).unwrap()).0.cpu.main.x, 0.65);
        s.slot(0, SlotType::Cpu, MARTH.icon, 9);
        assert!(tapped(&two(&mut nav, &s), Button::A, false), "let go at 9");
        // Everything set: START only once the banner is shown.
        s.hand(0, css::slider_token(0, 9), H::Open);
        let steps = two(&mut nav, &s);
        assert_eq!(steps[0].1, Task::Start);
        assert!(!steps.iter().any(|(p, _)| p.agent.pressed(Button::Start)), "no START while the banner is hidden");
        s.w().set_u8(css::READY_BANNER, css::READY_SHOWN).unwrap();
        assert!(tapped(&two(&mut nav, &s), Button::Start, true));
    }

    #[test]
    fn a_coin_in_hand_is_not_down_whatever_the_slot_shows() {
        // The slot shows Fox, but the hand (+5 = 1, +6 = its own coin) still grabs the
        // coin: not down, so A puts it down and there is no START. A byte elsewhere in
        // the struct saying 2 means nothing.
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Coin).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, MARTH.icon_centre(), H::Open).slot(0, SlotType::Cpu, MARTH.icon, 9);
        s.w().set_u8(HANDS + 0x100 + 2, 2).unwrap();
        let mut nav = Navigator::new(goal(), false);
        let steps = two(&mut nav, &s);
        assert_eq!(steps[0].1, Task::AgentCoin);
        assert!(tapped(&steps, Button::A, true), "A puts the coin down");
    }

    #[test]
    fn the_cpu_hand_holding_the_slider_drags_and_lets_go_before_anything_else() {
        // Regression: the hand grabbing the slider reads 1 at +5, as a coin in hand does.
        // The old navigator took it for the coin, steered the hand toward Marth (dragging
        // the slider to its maximum) and never pressed A: the walk stopped at "the CPU
        // port's hand placing its coin" whenever the level was not already the one asked.
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, css::slider_token(0, 5), H::Slider).slot(0, SlotType::Cpu, MARTH.icon, 5);
        let mut nav = Navigator::new(goal(), false);
        let (pads, task) = press(nav.next(s.view()).unwrap());
        assert_eq!(task, Task::CpuLevel, "the slider first, not the coin");
        assert_eq!((pads.cpu.main.x, pads.cpu.main.y), (0.65, 0.5), "a light tilt right, along the slider only");
        // Above the level asked: left. At it: A lets go, and nothing steers.
        s.slot(0, SlotType::Cpu, MARTH.icon, 9);
        let mut g = goal();
        g.cpu_level = 4;
        let mut nav = Navigator::new(g, false);
        assert_eq!(press(nav.next(s.view()).unwrap()).0.cpu.main.x, 0.35);
        g.cpu_level = 9;
        let steps = two(&mut Navigator::new(g, false), &s);
        assert!(tapped(&steps, Button::A, false), "A lets go at 9");
        assert!(steps.iter().all(|(p, t)| p.cpu.main == Pad::NEUTRAL.main && *t == Task::CpuLevel), "{steps:?}");
    }

    #[test]
    fn the_bot_switches_its_own_port_back_to_human_when_it_is_a_cpu_or_off() {
        // Regression: a bot port left on CPU (or off) let Melee's CPU play as "the bot".
        for kind in [SlotType::Cpu, SlotType::Off] {
            let mut s = Screenshot::css();
            s.hand(1, FOX.icon_centre(), H::Open).slot(1, kind, FOX.icon, 9);
            s.hand(0, MARTH.icon_centre(), H::Open).slot(0, SlotType::Cpu, MARTH.icon, 9);
            s.w().set_u8(css::READY_BANNER, css::READY_SHOWN).unwrap();
            let mut nav = Navigator::new(goal(), false);
            let (pads, task) = press(nav.next(s.view()).unwrap());
            assert_eq!(task, Task::AgentToggle, "{kind:?}");
            assert!(pads.agent.main.y < 0.5 && !pads.agent.pressed(Button::Start), "down toward its toggle, no START: {pads:?}");
            s.hand(1, css::toggle(1), H::Open);
            assert!(tapped(&two(&mut nav, &s), Button::A, true), "{kind:?}: A on its own toggle");
            s.slot(1, SlotType::Human, FOX.icon, 9);
            assert_eq!(two(&mut nav, &s)[0].1, Task::Start, "{kind:?}");
        }
        // Its coin still in hand: down first (the toggle ignores a hand that grabs).
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Coin).slot(1, SlotType::Cpu, FOX.icon, 9);
        assert_eq!(press(Navigator::new(goal(), false).next(s.view()).unwrap()).1, Task::AgentCoin);
    }

    #[test]
    fn against_a_person_their_port_is_left_alone_and_their_character_accepted() {
        let g = MenuGoal { opponent: Opponent::Human, ..goal() };
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Coin).slot(1, SlotType::Human, NONE, 0);
        // The person still holds their coin, over Luigi.
        s.hand(0, LUIGI.icon_centre(), H::Coin).slot(0, SlotType::Human, NONE, 0);
        let mut nav = Navigator::new(g, false);
        for _ in 0..4 {
            let (pads, task) = press(nav.next(s.view()).unwrap());
            assert_eq!(pads.cpu, Pad::NEUTRAL, "nothing on their port");
            assert_eq!(task, Task::AgentCoin);
        }
        // The bot's coin is down: now it waits for theirs.
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        let steps = two(&mut nav, &s);
        assert!(steps.iter().all(|(p, t)| *t == Task::PersonCoin && *p == Pads::NEUTRAL), "{steps:?}");
        // In game they play Luigi: that is theirs to choose.
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        s.fighters(action::WAIT, [FOX, LUIGI]).kinds(SlotType::Human, SlotType::Human);
        assert_eq!(Navigator::new(g, false).next(s.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn against_a_person_the_bot_never_presses_start_nor_picks_the_stage_and_waits_without_a_clock() {
        // Issue 40: the walk sat in its Start step with a 20 s budget, ended the session
        // when a person took longer, and pressed START the moment the banner showed.
        let g = MenuGoal { opponent: Opponent::Human, ..goal() };
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, LUIGI.icon_centre(), H::Open).slot(0, SlotType::Human, LUIGI.icon, 0);
        s.w().set_u8(css::READY_BANNER, css::READY_SHOWN).unwrap();
        let mut nav = Navigator::new(g, false);
        // Ten minutes of a banner shown and nobody pressing START: no error, no press.
        for frame in 0..60 * 60 * 10 {
            let (pads, task) = press(nav.next(s.view()).unwrap());
            assert_eq!((pads, task), (Pads::NEUTRAL, Task::PersonStart), "frame {frame}");
        }
        // Their START took them to stage select: theirs to pick, as long as they like.
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::STAGE_SELECT);
        s.stage_cursor(-20.0, 10.0);
        for _ in 0..60 * 60 * 5 {
            assert_eq!(press(nav.next(s.view()).unwrap()), (Pads::NEUTRAL, Task::PersonStage));
        }
        assert!(Task::PersonStart.budget().is_none() && Task::PersonCoin.budget().is_none() && Task::Start.budget().is_some());
    }

    #[test]
    fn a_persons_slot_on_cpu_is_said_and_a_match_their_port_plays_as_a_cpu_is_quit() {
        let g = MenuGoal { opponent: Opponent::Human, ..goal() };
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        // A press on their own toggle: their slot is a CPU's, their coin still down.
        s.hand(0, (-30.0, -15.0), H::Open).slot(0, SlotType::Cpu, LUIGI.icon, 1);
        let mut nav = Navigator::new(g, false);
        assert_eq!(press(nav.next(s.view()).unwrap()), (Pads::NEUTRAL, Task::PersonSlot));
        // They started that match anyway: Melee's CPU plays their port. It is quit (the
        // paper's L+R+A+START), not handed to the bot as a match against them.
        let mut m = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        m.fighters(action::WAIT, [FOX, LUIGI]).kinds(SlotType::Human, SlotType::Cpu);
        let steps = two(&mut nav, &m);
        assert!(steps.iter().all(|(_, t)| *t == Task::QuitCpuMatch), "{steps:?}");
        assert!(tapped(&steps, Button::Start, true) && tapped(&steps, Button::L, true), "{steps:?}");
        // Back on character select; set back to HMN, the next match is theirs.
        assert_eq!(press(nav.next(s.view()).unwrap()).1, Task::PersonSlot);
        s.slot(0, SlotType::Human, LUIGI.icon, 1);
        assert_eq!(press(nav.next(s.view()).unwrap()).1, Task::PersonStart);
        m.kinds(SlotType::Human, SlotType::Human);
        assert_eq!(nav.next(m.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn a_match_with_the_bots_port_played_by_melees_cpu_is_quit_whoever_the_opponent_is() {
        // Issue 46: any hand can press the bot's HMN/CPU toggle, and START may follow at
        // once; Melee's CPU then plays the bot's port, and the match was counted as the
        // bot's. Against a CPU, a person or an opponent bot alike.
        for opponent in [Opponent::Cpu, Opponent::Human, Opponent::Bot] {
            let g = MenuGoal { opponent, ..goal() };
            let theirs = if opponent == Opponent::Cpu { SlotType::Cpu } else { SlotType::Human };
            let mut m = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
            m.fighters(action::WAIT, [FOX, MARTH]).kinds(SlotType::Cpu, theirs);
            let mut nav = Navigator::new(g, false);
            let steps = two(&mut nav, &m);
            assert!(steps.iter().all(|(_, t)| *t == Task::QuitBotCpuMatch), "{opponent:?}: {steps:?}");
            assert!(tapped(&steps, Button::Start, true) && tapped(&steps, Button::L, true), "{opponent:?}: the bot's pipe quits: {steps:?}");
            // Played as set up: handed to the bot.
            m.kinds(SlotType::Human, theirs);
            assert_eq!(Navigator::new(g, false).next(m.view()).unwrap(), MenuStep::Done, "{opponent:?}");
            // The opponent's port played by another kind: quit too.
            let other = if opponent == Opponent::Cpu { SlotType::Human } else { SlotType::Cpu };
            m.kinds(SlotType::Human, other);
            assert_eq!(press(Navigator::new(g, false).next(m.view()).unwrap()).1, Task::QuitCpuMatch, "{opponent:?}");
        }
        // In the match that is being quit (one the bot played), nothing is checked again.
        let mut m = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        m.fighters(action::WAIT, [FOX, MARTH]);
        assert_eq!(press(Navigator::new(goal(), true).next(m.view()).unwrap()).1, Task::QuitMatch);
    }

    #[test]
    fn a_person_with_no_controller_in_their_port_is_told_at_once_and_then_to_set_their_slot() {
        // Issue 46: Melee marks a port with no controller at once (the hand's state 3)
        // and turns a human slot into a CPU; the walk waited a minute of still hand, and
        // then asked for a toggle press their controller could not make.
        let g = MenuGoal { opponent: Opponent::Human, ..goal() };
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, (-31.0, -21.5), H::Unplugged).slot(0, SlotType::Cpu, NONE, 1);
        let mut nav = Navigator::new(g, false);
        assert_eq!(press(nav.next(s.view()).unwrap()), (Pads::NEUTRAL, Task::PersonUnplugged), "said on the first frame");
        for _ in 0..PERSON_SILENT_FRAMES + 2 {
            assert_eq!(press(nav.next(s.view()).unwrap()).1, Task::PersonUnplugged, "no toggle asked of an unplugged controller");
        }
        assert!(Task::PersonUnplugged.waits_for_person() && Task::PersonUnplugged.budget().is_none());
        // Plugged back in: the slot Melee turned to CPU is now theirs to set back.
        s.hand(0, (-31.0, -21.5), H::Open);
        assert_eq!(press(nav.next(s.view()).unwrap()).1, Task::PersonSlot);
        s.slot(0, SlotType::Human, NONE, 1);
        assert_eq!(press(nav.next(s.view()).unwrap()).1, Task::PersonCoin);
    }

    #[test]
    fn a_person_whose_hand_never_moves_for_a_minute_is_told_to_check_the_port() {
        let g = MenuGoal { opponent: Opponent::Human, ..goal() };
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, (10.0, -15.0), H::Open).slot(0, SlotType::Human, NONE, 0);
        let mut nav = Navigator::new(g, false);
        let tasks: Vec<Task> = (0..PERSON_SILENT_FRAMES + 2).map(|_| press(nav.next(s.view()).unwrap()).1).collect();
        assert!(tasks[..PERSON_SILENT_FRAMES as usize].iter().all(|t| *t == Task::PersonCoin), "a minute of patience first");
        assert_eq!(tasks.last(), Some(&Task::PersonSilent));
        // The hand moves: they are there after all.
        s.hand(0, (11.0, -15.0), H::Open);
        assert_eq!(press(nav.next(s.view()).unwrap()).1, Task::PersonCoin);
    }

    #[test]
    fn an_opponent_bot_places_its_own_coin_on_marth_and_keeps_its_port_human() {
        let g = MenuGoal { opponent: Opponent::Bot, ..goal() };
        // Its port starts as a CPU, its hand open over Luigi: the toggle first (to HMN),
        // never the level slider.
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Open).slot(1, SlotType::Human, FOX.icon, 0);
        s.hand(0, LUIGI.icon_centre(), H::Open).slot(0, SlotType::Cpu, LUIGI.icon, 3);
        let mut nav = Navigator::new(g, false);
        let (pads, task) = press(nav.next(s.view()).unwrap());
        assert_eq!(task, Task::OpponentToggle);
        assert_eq!(pads.agent, Pad::NEUTRAL, "the bot's coin is down: its hand rests");
        s.hand(0, css::toggle(0), H::Open);
        assert!(tapped(&two(&mut nav, &s), Button::A, false), "A on its own toggle");
        // Human now, its coin down on Luigi: B calls it back over Marth, then A.
        s.slot(0, SlotType::Human, LUIGI.icon, 3).hand(0, MARTH.icon_centre(), H::Open);
        let steps = two(&mut nav, &s);
        assert!(steps.iter().all(|(_, t)| *t == Task::OpponentCoin) && tapped(&steps, Button::B, false), "{steps:?}");
        s.hand(0, MARTH.icon_centre(), H::Coin).slot(0, SlotType::Human, NONE, 3);
        assert!(tapped(&two(&mut nav, &s), Button::A, false));
        // Down on Marth, still human (its level untouched): START once the banner shows.
        s.hand(0, MARTH.icon_centre(), H::Open).slot(0, SlotType::Human, MARTH.icon, 3);
        s.w().set_u8(css::READY_BANNER, css::READY_SHOWN).unwrap();
        let steps = two(&mut nav, &s);
        assert!(steps.iter().all(|(p, t)| *t == Task::Start && p.cpu == Pad::NEUTRAL) && tapped(&steps, Button::Start, true), "{steps:?}");
        // In game it must be Marth, as a CPU must.
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::IN_GAME);
        s.fighters(action::WAIT, [FOX, LUIGI]).kinds(SlotType::Human, SlotType::Human);
        assert!(matches!(Navigator::new(g, false).next(s.view()), Err(MenuError::WrongCharacters { .. })));
        s.fighters(action::WAIT, [FOX, MARTH]).kinds(SlotType::Human, SlotType::Human);
        assert_eq!(Navigator::new(g, false).next(s.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn stage_select_waits_then_steers_to_final_destination() {
        let mut s = Screenshot::new(scene::MAJOR_VS, scene::STAGE_SELECT);
        s.stage_cursor(-20.0, -9.0);
        let mut nav = Navigator::new(goal(), false);
        for _ in 0..20 {
            assert_eq!(press(nav.next(s.view()).unwrap()).0, Pads::NEUTRAL, "fade-in: no input");
        }
        let (pads, _) = press(nav.next(s.view()).unwrap());
        assert!(pads.agent.main.x > 0.9 && (pads.agent.main.y - 0.5).abs() < 1e-6, "right toward FD, hard when far: {:?}", pads.agent.main);
        s.stage_cursor(4.0, -9.0);
        let (pads, _) = press(nav.next(s.view()).unwrap());
        assert!(pads.agent.main.x > 0.5 && pads.agent.main.x < 0.9, "gentler when close: {:?}", pads.agent.main);
        s.stage_cursor(6.5, -9.2);
        assert!(tapped(&two(&mut nav, &s), Button::A, true));
        // A broken pointer chain: wait, no panic.
        s.w().set_u32(css::SSS_ROOT, 0xDEAD_BEEF).unwrap();
        assert_eq!(press(nav.next(s.view()).unwrap()).0, Pads::NEUTRAL);
    }

    #[test]
    fn a_step_that_outlives_its_budget_says_which_step_and_what_ram_said() {
        let mut s = Screenshot::css();
        s.hand(1, FOX.icon_centre(), H::Coin).slot(1, SlotType::Human, NONE, 0);
        let mut nav = Navigator::new(goal(), false);
        let err = (0..=Task::AgentCoin.budget().unwrap() + 1).find_map(|_| nav.next(s.view()).err()).expect("stuck after the budget");
        let msg = err.to_string();
        assert!(matches!(err, MenuError::Stuck { task: Task::AgentCoin, .. }), "{msg}");
        assert!(msg.contains("the bot's hand placing its coin") && msg.contains("Grabbing (Coin(1))") && msg.contains("0x803F0E0A"), "{msg}");
    }

    #[test]
    fn other_scenes_wait_and_short_views_are_errors_not_panics() {
        let s = Screenshot::new(0x28, 0); // the boot scene
        assert_eq!(press(Navigator::new(goal(), false).next(s.view()).unwrap()), (Pads::NEUTRAL, Task::WaitingForMenus));
        assert!(Navigator::new(goal(), false).next(RamView::mem1(&[0u8; 64])).is_err());
    }

    #[test]
    fn steering_is_proportional_and_stops_inside_the_window() {
        assert_eq!(steer((0.0, 0.0), (1.0, -1.0), 1.5), None);
        let far = steer((0.0, 0.0), (40.0, 0.0), 1.5).unwrap().main;
        let near = steer((0.0, 0.0), (2.0, 0.0), 1.5).unwrap().main;
        assert!(far.x > 0.98 && near.x > 0.5 && near.x < 0.85, "{far:?} {near:?}");
    }
}
