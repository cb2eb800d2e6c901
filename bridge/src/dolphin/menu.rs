//! Getting a real Melee (NTSC 1.02) from wherever it is into a fresh match: the
//! decision logic only, one pad per frame from what RAM says, so it is unit-tested on
//! synthetic RAM images and [`super::Dolphin`] just applies it.
//!
//! The scene byte says where we are (reference, section 2: major scene at 0x80479D30,
//! 2 = versus mode; the "menu" byte 0x80479D33: 0 character select, 1 stage select,
//! 2 in game, 4 post-game). On character select, cursor positions come from RAM and
//! the pad steers toward a target, the way libmelee's menu helper does:
//! 1. the opponent's port is switched to CPU (its HMN/CPU toggle),
//! 2. the CPU's level is set on its slider (open loop: the level is not read back),
//! 3. the CPU's token is carried to its character (default Marth),
//! 4. the bot's token goes to its character (default Fox),
//! 5. START; on stage select, the cursor goes to the stage (Final Destination), A.
//!
//! In a match that is not fresh (we already played in it), it quits with START, then
//! L + R + A + START held. On the post-game screens it taps START back to character
//! select.
//!
//! **Unverified here**: there is no Melee image on the machines this was written on.
//! The addresses and screen geometry in [`css`] come from libmelee's `Locations.txt`
//! and `menuhelper.py` (public); the logic is tested on synthetic RAM only.

use crate::melee::{action, character};
use crate::pad::{Button, Pad};
use crate::ram::{addr, is_mem1_pointer, RamError, RamView};

/// Character-select and stage-select addresses and geometry (libmelee; unverified here).
pub mod css {
    /// Cursor x (f32) of port 0's hand on the CSS; y is 4 bytes later; ports are
    /// [`CURSOR_STRIDE`] apart, *downwards* (port 1 at 0x8111826C).
    pub const CURSOR_X: u32 = 0x8111_8DEC;
    pub const CURSOR_STRIDE: u32 = 0xB80;
    /// Per-port CSS slot, 0x24 bytes each: +0 slot type (0 human, 1 CPU, 3 none),
    /// +2 the character on the slot (CSS id, as in [`crate::melee::character`]).
    pub const SLOT: u32 = 0x803F_0E08;
    pub const SLOT_STRIDE: u32 = 0x24;
    pub const SLOT_TYPE: u32 = 0x0;
    pub const SLOT_CHARACTER: u32 = 0x2;
    pub const TYPE_CPU: u8 = 1;
    /// Pointer to each port's token state; token "down" (placed) when the byte at +2 is 2.
    pub const TOKEN_PTR: u32 = 0x804A_0BC0;
    pub const TOKEN_DOWN: u8 = 2;
    /// Stage-select cursor: follow 0x80BDA810, add 0x28, follow, then +0x38 x / +0x3C y.
    pub const SSS_PTR: u32 = 0x80BD_A810;
    /// How close (in CSS units) the hand must be to a target.
    pub const WIGGLE: f32 = 1.5;
    /// x of each port's HMN/CPU toggle, at y = -2.2.
    pub const TOGGLE_X: [f32; 4] = [-31.5, -16.5, -1.0, 14.0];
    pub const TOGGLE_Y: f32 = -2.2;
    /// Where a CPU's token rests on its port's panel after the toggle, and the CPU-level
    /// slider under it (level 1 at the left end, 9 at the right end).
    pub const TOKEN_REST_Y: f32 = -9.0;
    pub const SLIDER_Y: f32 = -14.5;
    pub const SLIDER_HALF_WIDTH: f32 = 5.5;
    /// Final Destination on the stage-select screen.
    pub const FINAL_DESTINATION: (f32, f32) = (6.7, -9.0);
}

/// Scene values.
pub mod scene {
    pub const MAJOR_VS: u8 = 0x02;
    pub const CSS: u8 = 0;
    pub const STAGE_SELECT: u8 = 1;
    pub const IN_GAME: u8 = 2;
    pub const POSTGAME: u8 = 4;
}

/// What the match should be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MenuGoal {
    pub agent_port: usize,
    pub opponent_port: usize,
    pub cpu_level: u8,
    /// CSS ids ([`crate::melee::character`]).
    pub agent_character: u32,
    pub cpu_character: u32,
    /// Stage cursor target on the stage-select screen.
    pub stage: (f32, f32),
}

impl Default for MenuGoal {
    fn default() -> Self {
        MenuGoal {
            agent_port: 1,
            opponent_port: 0,
            cpu_level: 9,
            agent_character: character::FOX,
            cpu_character: character::MARTH,
            stage: css::FINAL_DESTINATION,
        }
    }
}

/// One frame's decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MenuStep {
    /// Hold this pad for one frame, then ask again.
    Press(Pad, &'static str),
    /// A fresh match is running: hand over to the bot.
    Done,
}

/// Where the screen is, as far as the navigator cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    CharacterSelect,
    StageSelect,
    InGame,
    PostGame,
    /// Not versus mode (title, main menu, a loading scene): wait.
    Other {
        major: u8,
        minor: u8,
    },
}

pub fn screen(ram: RamView) -> Result<Screen, RamError> {
    let major = ram.u8(addr::SCENE)?;
    let minor = ram.menu()?;
    Ok(match (major, minor) {
        (scene::MAJOR_VS, scene::CSS) => Screen::CharacterSelect,
        (scene::MAJOR_VS, scene::STAGE_SELECT) => Screen::StageSelect,
        (scene::MAJOR_VS, scene::IN_GAME) => Screen::InGame,
        (scene::MAJOR_VS, scene::POSTGAME) => Screen::PostGame,
        _ => Screen::Other { major, minor },
    })
}

fn cursor(ram: RamView, port: usize) -> Result<(f32, f32), RamError> {
    let x = css::CURSOR_X.wrapping_sub(css::CURSOR_STRIDE * port as u32);
    Ok((ram.f32(x)?, ram.f32(x + 4)?))
}
fn slot(port: usize, field: u32) -> u32 {
    css::SLOT + css::SLOT_STRIDE * port as u32 + field
}
fn token_down(ram: RamView, port: usize) -> Result<bool, RamError> {
    let p = ram.u32(css::TOKEN_PTR + 4 * port as u32)?;
    Ok(is_mem1_pointer(p) && ram.u8(p + 2)? == css::TOKEN_DOWN)
}
fn stage_cursor(ram: RamView) -> Result<Option<(f32, f32)>, RamError> {
    let p1 = ram.u32(css::SSS_PTR)?;
    if !is_mem1_pointer(p1) {
        return Ok(None);
    }
    let p2 = ram.u32(p1 + 0x28)?;
    if !is_mem1_pointer(p2) {
        return Ok(None);
    }
    Ok(Some((ram.f32(p2 + 0x38)?, ram.f32(p2 + 0x3C)?)))
}

/// The CSS icon centre of a character (libmelee's grid: 9 per row, the random slot
/// shifting the bottom row one place).
pub fn icon(css_id: u32) -> (f32, f32) {
    let (row, mut col) = (css_id / 9, css_id % 9);
    if row == 2 {
        col += 1;
    }
    let row = 2u32.saturating_sub(row);
    (-32.5 + 3.5 + col as f32 * 7.0, 1.0 + 3.5 + row as f32 * 7.0)
}

/// The slider position for a CPU level on `port`'s panel.
pub fn slider(port: usize, level: u8) -> (f32, f32) {
    let centre = css::TOGGLE_X[port.min(3)] + 7.0;
    let t = (level.clamp(1, 9) - 1) as f32 / 8.0;
    (centre - css::SLIDER_HALF_WIDTH + t * 2.0 * css::SLIDER_HALF_WIDTH, css::SLIDER_Y)
}

/// Steer the hand at `at` toward `target`: a stick push, or `None` once there.
fn steer(at: (f32, f32), target: (f32, f32)) -> Option<Pad> {
    let w = css::WIGGLE;
    if at.1 < target.1 - w {
        Some(Pad::NEUTRAL.with_main(0.5, 1.0))
    } else if at.1 > target.1 + w {
        Some(Pad::NEUTRAL.with_main(0.5, 0.0))
    } else if at.0 < target.0 - w {
        Some(Pad::NEUTRAL.with_main(1.0, 0.5))
    } else if at.0 > target.0 + w {
        Some(Pad::NEUTRAL.with_main(0.0, 0.5))
    } else {
        None
    }
}

/// The CSS sub-steps that are not read back from RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum CssMemo {
    #[default]
    Start,
    LevelSet,
    CarryingCpuToken,
}

/// Decides one pad per frame until a fresh match runs. Keep one per `reset`.
#[derive(Debug, Clone)]
pub struct Navigator {
    goal: MenuGoal,
    /// We played in the match on screen: it must be quit, not reused.
    quit_current: bool,
    /// Frames since the navigator started (alternating presses, waits).
    t: u64,
    /// Frames spent on the current screen.
    on_screen: u64,
    last_screen: Option<Screen>,
    memo: CssMemo,
}

impl Navigator {
    pub fn new(goal: MenuGoal, quit_current: bool) -> Self {
        Navigator { goal, quit_current, t: 0, on_screen: 0, last_screen: None, memo: CssMemo::Start }
    }

    /// Tap a button: pressed on even frames, released on odd ones, because menus act
    /// on the press, not on the hold.
    fn tap(&self, b: Button, why: &'static str) -> MenuStep {
        let pad = if self.t.is_multiple_of(2) { Pad::NEUTRAL.with(b) } else { Pad::NEUTRAL };
        MenuStep::Press(pad, why)
    }

    pub fn next(&mut self, ram: RamView) -> Result<MenuStep, RamError> {
        let s = screen(ram)?;
        if self.last_screen != Some(s) {
            self.on_screen = 0;
            if self.last_screen.is_some() && s == Screen::CharacterSelect {
                self.memo = CssMemo::Start;
            }
            self.last_screen = Some(s);
        }
        let step = match s {
            Screen::InGame => self.in_game(ram)?,
            Screen::PostGame => self.tap(Button::Start, "post-game: START back to character select"),
            Screen::StageSelect => self.stage_select(ram)?,
            Screen::CharacterSelect => {
                self.quit_current = false; // whatever was on screen is gone
                self.character_select(ram)?
            }
            Screen::Other { .. } => MenuStep::Press(Pad::NEUTRAL, "waiting for versus mode"),
        };
        self.t += 1;
        self.on_screen += 1;
        Ok(step)
    }

    fn in_game(&mut self, ram: RamView) -> Result<MenuStep, RamError> {
        if self.quit_current {
            // Pause first, then hold the quit combination.
            let pad = match self.on_screen {
                0 => Pad::NEUTRAL.with(Button::Start),
                1 => Pad::NEUTRAL,
                _ => Pad::NEUTRAL.with(Button::L).with(Button::R).with(Button::A).with(Button::Start).with_l(1.0),
            };
            return Ok(MenuStep::Press(pad, "quitting the finished match (L+R+A+START)"));
        }
        // Fresh when both fighters exist and the bot is past the entry animation.
        let fighters = [self.goal.agent_port, self.goal.opponent_port].map(|p| ram.player(p).and_then(|pl| pl.fighter()));
        if let [Ok(Some(me)), Ok(Some(_))] = fighters {
            let a = me.action_state()?;
            if !(action::ENTRY..=action::ENTRY_END).contains(&a) {
                return Ok(MenuStep::Done);
            }
        }
        Ok(MenuStep::Press(Pad::NEUTRAL, "waiting for the match to start"))
    }

    fn stage_select(&mut self, ram: RamView) -> Result<MenuStep, RamError> {
        // The screen ignores input while it fades in.
        if self.on_screen < 20 {
            return Ok(MenuStep::Press(Pad::NEUTRAL, "stage select: fading in"));
        }
        let Some(at) = stage_cursor(ram)? else { return Ok(MenuStep::Press(Pad::NEUTRAL, "stage select: no cursor yet")) };
        Ok(match steer(at, self.goal.stage) {
            Some(pad) => MenuStep::Press(pad, "stage select: moving to the stage"),
            None => self.tap(Button::A, "stage select: picking the stage"),
        })
    }

    fn character_select(&mut self, ram: RamView) -> Result<MenuStep, RamError> {
        let g = self.goal;
        let me = g.agent_port;
        let at = cursor(ram, me)?;
        let go = |target: (f32, f32), why: &'static str, nav: &Self| -> MenuStep {
            match steer(at, target) {
                Some(pad) => MenuStep::Press(pad, why),
                None => nav.tap(Button::A, why),
            }
        };
        // 1. Opponent port to CPU.
        if ram.u8(slot(g.opponent_port, css::SLOT_TYPE))? != css::TYPE_CPU {
            return Ok(go((css::TOGGLE_X[g.opponent_port.min(3)], css::TOGGLE_Y), "CSS: switching the opponent's port to CPU", self));
        }
        // 2. Its level (open loop: pressed once on the slider, then trusted).
        if self.memo == CssMemo::Start {
            let target = slider(g.opponent_port, g.cpu_level);
            return Ok(match steer(at, target) {
                Some(pad) => MenuStep::Press(pad, "CSS: moving to the CPU level slider"),
                None => {
                    self.memo = CssMemo::LevelSet;
                    MenuStep::Press(Pad::NEUTRAL.with(Button::A), "CSS: setting the CPU level")
                }
            });
        }
        // 3. The CPU's character: pick up its token, drop it on the icon.
        if u32::from(ram.u8(slot(g.opponent_port, css::SLOT_CHARACTER))?) != g.cpu_character {
            if self.memo != CssMemo::CarryingCpuToken {
                let rest = (css::TOGGLE_X[g.opponent_port.min(3)] + 7.0, css::TOKEN_REST_Y);
                return Ok(match steer(at, rest) {
                    Some(pad) => MenuStep::Press(pad, "CSS: going to the CPU's token"),
                    None => {
                        self.memo = CssMemo::CarryingCpuToken;
                        MenuStep::Press(Pad::NEUTRAL.with(Button::A), "CSS: picking up the CPU's token")
                    }
                });
            }
            return Ok(match steer(at, icon(g.cpu_character)) {
                Some(pad) => MenuStep::Press(pad, "CSS: carrying the CPU's token"),
                None => {
                    // Dropped; if the character did not take, pick the token up again.
                    self.memo = CssMemo::LevelSet;
                    MenuStep::Press(Pad::NEUTRAL.with(Button::A), "CSS: placing the CPU's token")
                }
            });
        }
        // 4. The bot's character: over the icon with the wrong one (or none) placed,
        // B takes the token back first (libmelee's trick); then A.
        let mine = u32::from(ram.u8(slot(me, css::SLOT_CHARACTER))?);
        let down = token_down(ram, me)?;
        if mine != g.agent_character || !down {
            if steer(at, icon(g.agent_character)).is_none() && down && mine != g.agent_character {
                return Ok(self.tap(Button::B, "CSS: taking back the bot's token"));
            }
            return Ok(go(icon(g.agent_character), "CSS: picking the bot's character", self));
        }
        // 5. Everything is set.
        Ok(self.tap(Button::Start, "CSS: starting"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ram::{static_player, RamMut};

    /// A synthetic MEM1 image holding just the fields the navigator reads.
    struct Screenshot {
        mem: Vec<u8>,
    }

    const TOKEN_BLOCK: u32 = 0x8070_0000;
    const SSS_BLOCK: u32 = 0x8070_1000;
    const FIGHTERS: [u32; 2] = [0x8071_0000, 0x8072_0000];

    impl Screenshot {
        fn new(minor: u8) -> Self {
            let mut s = Screenshot { mem: vec![0; addr::MEM1_SIZE] };
            let mut w = s.w();
            w.set_u8(addr::SCENE, scene::MAJOR_VS).unwrap();
            w.set_u8(addr::MENU, minor).unwrap();
            for p in 0..4 {
                w.set_u32(css::TOKEN_PTR + 4 * p, TOKEN_BLOCK + 0x10 * p).unwrap();
            }
            w.set_u32(css::SSS_PTR, SSS_BLOCK).unwrap();
            w.set_u32(SSS_BLOCK + 0x28, SSS_BLOCK + 0x100).unwrap();
            s
        }
        fn w(&mut self) -> RamMut<'_> {
            RamMut::mem1(&mut self.mem)
        }
        fn view(&self) -> RamView<'_> {
            RamView::mem1(&self.mem)
        }
        fn cursor(&mut self, port: usize, x: f32, y: f32) -> &mut Self {
            let a = css::CURSOR_X - css::CURSOR_STRIDE * port as u32;
            self.w().set_f32(a, x).unwrap();
            self.w().set_f32(a + 4, y).unwrap();
            self
        }
        fn slot(&mut self, port: usize, kind: u8, ch: u8) -> &mut Self {
            self.w().set_u8(slot(port, css::SLOT_TYPE), kind).unwrap();
            self.w().set_u8(slot(port, css::SLOT_CHARACTER), ch).unwrap();
            self
        }
        fn token_down(&mut self, port: usize, down: bool) -> &mut Self {
            self.w().set_u8(TOKEN_BLOCK + 0x10 * port as u32 + 2, if down { 2 } else { 0 }).unwrap();
            self
        }
        fn stage_cursor(&mut self, x: f32, y: f32) -> &mut Self {
            self.w().set_f32(SSS_BLOCK + 0x100 + 0x38, x).unwrap();
            self.w().set_f32(SSS_BLOCK + 0x100 + 0x3C, y).unwrap();
            self
        }
        fn fighters(&mut self, agent_action: u32) -> &mut Self {
            for (port, e) in FIGHTERS.iter().enumerate() {
                let b = crate::ram::static_block(port);
                self.w().set_u32(b + static_player::FIGHTER_PTR, *e).unwrap();
                self.w().set_u32(e + crate::ram::fighter::ACTION_STATE, if port == 1 { agent_action } else { action::WAIT }).unwrap();
            }
            self
        }
    }

    fn pad_of(step: MenuStep) -> Pad {
        match step {
            MenuStep::Press(p, _) => p,
            MenuStep::Done => panic!("expected a press, got Done"),
        }
    }
    fn stick(step: MenuStep) -> (f32, f32) {
        let p = pad_of(step);
        (p.main.x, p.main.y)
    }
    /// Two consecutive decisions (taps alternate press/release).
    fn two(nav: &mut Navigator, s: &Screenshot) -> [Pad; 2] {
        [pad_of(nav.next(s.view()).unwrap()), pad_of(nav.next(s.view()).unwrap())]
    }

    #[test]
    fn fresh_match_is_done_and_entry_animation_waits() {
        let mut s = Screenshot::new(scene::IN_GAME);
        s.fighters(action::ENTRY_START);
        let mut nav = Navigator::new(MenuGoal::default(), false);
        assert_eq!(pad_of(nav.next(s.view()).unwrap()), Pad::NEUTRAL, "entry animation: wait");
        s.fighters(action::WAIT);
        assert_eq!(nav.next(s.view()).unwrap(), MenuStep::Done);
        // No fighters yet (pointers null): wait, do not hand over.
        let s2 = Screenshot::new(scene::IN_GAME);
        assert_ne!(Navigator::new(MenuGoal::default(), false).next(s2.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn a_played_match_is_quit_with_pause_then_l_r_a_start() {
        let mut s = Screenshot::new(scene::IN_GAME);
        s.fighters(action::WAIT);
        let mut nav = Navigator::new(MenuGoal::default(), true);
        let first = pad_of(nav.next(s.view()).unwrap());
        assert!(first.pressed(Button::Start) && !first.pressed(Button::A));
        assert_eq!(pad_of(nav.next(s.view()).unwrap()), Pad::NEUTRAL);
        let held = pad_of(nav.next(s.view()).unwrap());
        for b in [Button::L, Button::R, Button::A, Button::Start] {
            assert!(held.pressed(b), "{b:?} held");
        }
        // Once on character select, the old match is gone: a later in-game is fresh.
        let mut css_shot = Screenshot::new(scene::CSS);
        css_shot.cursor(1, 0.0, 0.0);
        nav.next(css_shot.view()).unwrap();
        assert_eq!(nav.next(s.view()).unwrap(), MenuStep::Done);
    }

    #[test]
    fn postgame_taps_start() {
        let s = Screenshot::new(scene::POSTGAME);
        let mut nav = Navigator::new(MenuGoal::default(), false);
        let [a, b] = two(&mut nav, &s);
        assert!(a.pressed(Button::Start) != b.pressed(Button::Start), "pressed then released");
    }

    #[test]
    fn css_first_switches_the_opponent_to_cpu() {
        let mut s = Screenshot::new(scene::CSS);
        s.slot(0, 0, 0).cursor(1, 10.0, 10.0); // opponent (port 0) is human; hand up and right
        let mut nav = Navigator::new(MenuGoal::default(), false);
        assert_eq!(stick(nav.next(s.view()).unwrap()), (0.5, 0.0), "down toward the toggle first");
        s.cursor(1, 10.0, -2.0);
        assert_eq!(stick(nav.next(s.view()).unwrap()), (0.0, 0.5), "then left");
        s.cursor(1, -31.0, -2.5);
        let [a, b] = two(&mut nav, &s);
        assert!(a.pressed(Button::A) != b.pressed(Button::A), "on the toggle: tap A");
    }

    #[test]
    fn css_sets_level_then_carries_the_cpu_token_then_picks_fox_then_starts() {
        let g = MenuGoal::default();
        let mut s = Screenshot::new(scene::CSS);
        s.slot(0, css::TYPE_CPU, 0).slot(1, 0, 0);
        let mut nav = Navigator::new(g, false);
        // Level slider for level 9: right end of port 0's panel.
        let (sx, sy) = slider(0, 9);
        assert!(sx > slider(0, 1).0);
        s.cursor(1, sx, sy);
        assert!(pad_of(nav.next(s.view()).unwrap()).pressed(Button::A), "click the slider");
        // Then to the CPU's token on its panel, pick it up.
        let rest = (css::TOGGLE_X[0] + 7.0, css::TOKEN_REST_Y);
        s.cursor(1, rest.0, rest.1 + 10.0);
        assert_eq!(stick(nav.next(s.view()).unwrap()), (0.5, 0.0));
        s.cursor(1, rest.0, rest.1);
        assert!(pad_of(nav.next(s.view()).unwrap()).pressed(Button::A), "pick up the token");
        // Carry it to Marth's icon and drop it there.
        let marth = icon(character::MARTH);
        s.cursor(1, marth.0 + 10.0, marth.1);
        assert_eq!(stick(nav.next(s.view()).unwrap()), (0.0, 0.5));
        s.cursor(1, marth.0, marth.1);
        assert!(pad_of(nav.next(s.view()).unwrap()).pressed(Button::A), "drop on Marth");
        s.slot(0, css::TYPE_CPU, character::MARTH as u8);
        // Now the bot's own character: move to Fox, tap A.
        let fox = icon(character::FOX);
        s.cursor(1, fox.0 - 10.0, fox.1);
        assert_eq!(stick(nav.next(s.view()).unwrap()), (1.0, 0.5));
        s.cursor(1, fox.0, fox.1);
        let [a, b] = two(&mut nav, &s);
        assert!(a.pressed(Button::A) || b.pressed(Button::A));
        // A wrong character placed under the hand: take the token back with B.
        s.slot(1, 0, character::MARTH as u8).token_down(1, true);
        let [a, b] = two(&mut nav, &s);
        assert!(a.pressed(Button::B) || b.pressed(Button::B));
        // Fox placed: START.
        s.slot(1, 0, character::FOX as u8);
        let [a, b] = two(&mut nav, &s);
        assert!(a.pressed(Button::Start) != b.pressed(Button::Start));
    }

    #[test]
    fn stage_select_waits_then_steers_to_final_destination() {
        let mut s = Screenshot::new(scene::STAGE_SELECT);
        s.stage_cursor(-20.0, -9.0);
        let mut nav = Navigator::new(MenuGoal::default(), false);
        for _ in 0..20 {
            assert_eq!(pad_of(nav.next(s.view()).unwrap()), Pad::NEUTRAL, "fade-in: no input");
        }
        assert_eq!(stick(nav.next(s.view()).unwrap()), (1.0, 0.5), "right toward FD");
        s.stage_cursor(6.5, -9.2);
        let [a, b] = two(&mut nav, &s);
        assert!(a.pressed(Button::A) != b.pressed(Button::A));
        // A garbage stage pointer: wait, no panic.
        s.w().set_u32(css::SSS_PTR, 0xDEAD_BEEF).unwrap();
        assert_eq!(pad_of(nav.next(s.view()).unwrap()), Pad::NEUTRAL);
    }

    #[test]
    fn other_scenes_wait_and_short_views_are_errors_not_panics() {
        let mut s = Screenshot::new(0);
        s.w().set_u8(addr::SCENE, 0x01).unwrap(); // main menu
        let mut nav = Navigator::new(MenuGoal::default(), false);
        assert_eq!(pad_of(nav.next(s.view()).unwrap()), Pad::NEUTRAL);
        assert!(Navigator::new(MenuGoal::default(), false).next(RamView::mem1(&[0u8; 64])).is_err());
    }

    #[test]
    fn icon_grid_matches_libmelee() {
        assert_eq!(icon(character::FOX), (-15.0, 18.5));
        assert_eq!(icon(character::MARTH), (-29.0, 11.5));
        assert_eq!(slider(0, 1).0 + 2.0 * css::SLIDER_HALF_WIDTH, slider(0, 9).0);
    }
}
