//! The peer's Melee: title screen, main menu, character select, stage select, the
//! match (the embedded simulator) with its pause, and the results, written into RAM
//! with the references' layout ([`super::layout`], the peer's own copy): each port has
//! its own hand on its own pipe, the slot byte is in icon order, the coin state is at
//! +5 of the hand struct, a CPU's level is set by dragging its slider, START needs the
//! ready banner, a pause can be missed.
//!
//! Hands move by their port's stick (Melee's dead zone, [`HAND_SPEED`] units a frame at
//! full tilt); menus act on presses (a button down now and up the frame before).

use super::layout::{self as lay, CPU, HUMAN, OFF};
use shine_bridge::ram::{addr, fighter, static_block, static_player, RamMut};
use shine_bridge::sim::Sim;
use shine_bridge::{Button, Emulator, MatchSetup, Pad};

/// Cursor units a hand moves in a frame at full tilt.
pub const HAND_SPEED: f32 = 1.0;
/// Melee's analog dead zone (of the -1..1 range).
const DEAD_ZONE: f32 = 0.2875;
/// Frames the "ready to fight" banner takes to swoop in (10 to 0).
const BANNER_FRAMES: u8 = lay::READY_HIDDEN;
/// Frames the stage-select screen ignores input while it fades in.
const STAGE_FADE: u32 = 20;
/// Where the peer keeps its heap structs (outside the simulator's RAM window).
const HANDS: u32 = 0x8111_0000;
const SSS_BLOCKS: [u32; 3] = [0x8112_0000, 0x8112_1000, 0x8112_2000];
/// The hand struct's first word, a GObj pointer in Melee. Its byte at +2 (0x45) is not
/// a coin state: code reading the coin at +2 instead of +5 never sees one down.
const HAND_GOBJ: u32 = 0x8123_4560;

/// The scenario's say in the menus.
#[derive(Debug, Clone)]
pub struct MenuScenario {
    /// Start on the title screen (a disc without the boot-to-character-select code)
    /// rather than on character select.
    pub boot_to_title: bool,
    /// The first this many pauses in a match are missed (a press between frames).
    pub missed_pauses: u32,
    /// The level a port's slider shows when it becomes a CPU.
    pub cpu_level_start: u8,
    /// Seed of the first match; match k uses seed + k.
    pub seed: u64,
    pub stocks: u8,
}

#[derive(Debug, Clone, Copy)]
struct Port {
    /// A pipe drives this port (a controller is plugged in).
    plugged: bool,
    hand: (f32, f32),
    holding_coin: bool,
    /// The icon the coin is down on.
    placed: Option<u8>,
    /// The slot byte: the icon hovered with the coin in hand, else the one placed on.
    icon: u8,
    /// Slot type byte: human, CPU, off.
    slot: u8,
    level: u8,
    holding_slider: bool,
}

pub enum Screen {
    /// Booting: a scene the navigator only waits on.
    Boot,
    Title,
    MainMenu {
        sub: u8,
        sel: u8,
    },
    Css,
    Stage {
        frames: u32,
        cursor: (f32, f32),
    },
    InGame {
        sim: Box<Sim>,
        paused: bool,
    },
    Results,
}

pub struct Menus {
    pub screen: Screen,
    ports: [Port; 4],
    banner: u8,
    prev: [Pad; 4],
    scen: MenuScenario,
    missed_left: u32,
    matches: u64,
    /// The characters of the match on (bot's port, CPU's port), for the fighter ids.
    cast: Option<[(usize, u8); 2]>,
}

fn deflection(v: f32) -> f32 {
    let d = (v - 0.5) * 2.0;
    if d.abs() < DEAD_ZONE {
        0.0
    } else {
        d
    }
}

fn near(at: (f32, f32), target: (f32, f32), half: (f32, f32)) -> bool {
    (at.0 - target.0).abs() < half.0 && (at.1 - target.1).abs() < half.1
}

/// The icon under a hand (icons are 7 units square around their centres).
fn icon_at(at: (f32, f32)) -> Option<u8> {
    (0..lay::GRID.len() as u8).find(|&i| near(at, lay::icon_centre(i), (3.5, 3.5)))
}

impl Menus {
    pub fn new(scen: MenuScenario, plugged: [bool; 4]) -> Menus {
        let ports = std::array::from_fn(|p| Port {
            plugged: plugged[p],
            hand: (-20.0 + 12.0 * p as f32, -8.0),
            holding_coin: plugged[p],
            placed: None,
            icon: 0x21, // nothing hovered yet
            slot: if plugged[p] { HUMAN } else { OFF },
            level: scen.cpu_level_start,
            holding_slider: false,
        });
        let missed_left = scen.missed_pauses;
        Menus { screen: Screen::Boot, ports, banner: BANNER_FRAMES, prev: [Pad::NEUTRAL; 4], scen, missed_left, matches: 0, cast: None }
    }

    /// Booting is over: the title screen, or (boot-to-CSS code) character select.
    pub fn booted(&mut self) {
        self.screen = if self.scen.boot_to_title { Screen::Title } else { Screen::Css };
    }

    pub fn is_cpu(&self, port: usize) -> bool {
        self.ports[port].slot == CPU
    }

    pub fn in_game(&self) -> bool {
        matches!(self.screen, Screen::InGame { .. })
    }

    /// One frame with these pads (`None`: no pipe on that port).
    pub fn frame(&mut self, pads: &[Option<Pad>; 4]) {
        let prev = self.prev;
        let pressed = move |p: usize, b: Button| pads[p].is_some_and(|pad| pad.pressed(b) && !prev[p].pressed(b));
        let any = |b: Button| (0..4).any(|p| pressed(p, b));
        let screen = std::mem::replace(&mut self.screen, Screen::Boot);
        self.screen = match screen {
            Screen::Boot => Screen::Boot,
            Screen::Title if any(Button::Start) => Screen::MainMenu { sub: lay::TOP, sel: 0 },
            Screen::Title => Screen::Title,
            Screen::MainMenu { sub, sel } => self.main_menu(sub, sel, pads, &pressed),
            Screen::Css => self.css(pads, &pressed),
            Screen::Stage { frames, cursor } => self.stage(frames, cursor, pads, &pressed),
            Screen::InGame { mut sim, paused } => {
                let start = (0..4).find(|&p| pressed(p, Button::Start));
                match (start, paused) {
                    // START with L, R and A held, while paused: quit to character select.
                    (Some(p), true) if [Button::L, Button::R, Button::A].iter().all(|b| pads[p].is_some_and(|pad| pad.pressed(*b))) => Screen::Css,
                    (Some(_), true) => Screen::InGame { sim, paused: false },
                    (Some(_), false) if self.missed_left > 0 => {
                        self.missed_left -= 1;
                        eprintln!("peer: missing this pause, as the scenario asks");
                        Screen::InGame { sim, paused: false }
                    }
                    (Some(_), false) => Screen::InGame { sim, paused: true },
                    (None, true) => Screen::InGame { sim, paused: true },
                    (None, false) => {
                        let (agent, _) = self.cast.expect("a match has a cast")[0];
                        let _ = sim.step(&pads[agent].unwrap_or(Pad::NEUTRAL));
                        let over = [0, 1].iter().any(|p| sim.ram().player(*p).and_then(|pl| pl.stocks()).is_ok_and(|s| s == 0));
                        if over {
                            Screen::Results
                        } else {
                            Screen::InGame { sim, paused: false }
                        }
                    }
                }
            }
            Screen::Results if any(Button::Start) => Screen::Css,
            Screen::Results => Screen::Results,
        };
        self.prev = pads.map(|pad| pad.unwrap_or(Pad::NEUTRAL));
    }

    fn main_menu(&mut self, sub: u8, sel: u8, pads: &[Option<Pad>; 4], pressed: &dyn Fn(usize, Button) -> bool) -> Screen {
        // The stick moves the selection once per push away from neutral.
        let push = |p: usize| {
            let (now, before) = (pads[p].map_or(0.0, |pad| deflection(pad.main.y)), deflection(self.prev[p].main.y));
            if before == 0.0 {
                now.signum() as i32 * (now != 0.0) as i32
            } else {
                0
            }
        };
        let items = if sub == lay::TOP { 5 } else { 3 };
        let moved: i32 = (0..4).map(push).sum();
        let sel = (i32::from(sel) - moved).rem_euclid(items) as u8; // down is +1
        let a = (0..4).any(|p| pressed(p, Button::A));
        let b = (0..4).any(|p| pressed(p, Button::B));
        match (sub, a, b) {
            (lay::TOP, true, _) if sel == 1 => Screen::MainMenu { sub: lay::VS, sel: 0 },
            (lay::TOP, true, _) => Screen::MainMenu { sub: 1 + sel, sel: 0 }, // another mode's submenu
            (lay::VS, true, _) if sel == 0 => Screen::Css,
            (s, _, true) if s != lay::TOP => Screen::MainMenu { sub: lay::TOP, sel: 0 },
            _ => Screen::MainMenu { sub, sel },
        }
    }

    fn css(&mut self, pads: &[Option<Pad>; 4], pressed: &dyn Fn(usize, Button) -> bool) -> Screen {
        for (p, pad) in pads.iter().enumerate() {
            let Some(pad) = pad else { continue };
            let me = self.ports[p];
            let (dx, dy) = (deflection(pad.main.x) * HAND_SPEED, deflection(pad.main.y) * HAND_SPEED);
            let mut port = me;
            port.hand = ((me.hand.0 + dx).clamp(-35.0, 35.0), (me.hand.1 + dy).clamp(-25.0, 25.0));
            if port.holding_slider {
                // The token follows the hand along the slider; the level is where it is.
                let base = lay::slider(p, 1).0;
                let token = port.hand.0.clamp(base, base + lay::SLIDER_OFFSETS[8]);
                port.level = (0..9)
                    .min_by(|&a, &b| (base + lay::SLIDER_OFFSETS[a] - token).abs().total_cmp(&(base + lay::SLIDER_OFFSETS[b] - token).abs()))
                    .unwrap() as u8
                    + 1;
            }
            if pressed(p, Button::A) {
                let toggled = (0..4).find(|&q| near(port.hand, lay::toggle(q), (3.0, 1.5)) && self.ports[q].plugged);
                if port.holding_slider {
                    port.holding_slider = false;
                } else if let Some(q) = toggled {
                    // HMN -> CPU -> off -> HMN, as the game's toggle cycles.
                    let next = match self.ports[q].slot {
                        HUMAN => CPU,
                        CPU => OFF,
                        _ => HUMAN,
                    };
                    if q == p {
                        port.slot = next;
                    } else {
                        self.ports[q].slot = next;
                    }
                } else if port.slot == CPU && near(port.hand, lay::slider(p, port.level), (1.5, 1.5)) {
                    port.holding_slider = true;
                } else if let (true, Some(icon)) = (port.holding_coin, icon_at(port.hand)) {
                    port.holding_coin = false;
                    port.placed = Some(icon);
                    port.icon = icon;
                }
            }
            if pressed(p, Button::B) && !port.holding_coin && port.placed.is_some() {
                port.holding_coin = true; // the coin comes back to the hand
                port.placed = None;
            }
            if port.holding_coin {
                if let Some(icon) = icon_at(port.hand) {
                    port.icon = icon; // the slot shows the character hovered
                }
            }
            self.ports[p] = port;
        }
        let playing: Vec<usize> = (0..4).filter(|&p| self.ports[p].slot != OFF && self.ports[p].plugged).collect();
        let ready = playing.len() >= 2 && playing.iter().all(|&p| self.ports[p].placed.is_some() && !self.ports[p].holding_slider);
        self.banner = if ready { self.banner.saturating_sub(1) } else { BANNER_FRAMES };
        if self.banner == 0 && (0..4).any(|p| pressed(p, Button::Start)) {
            return Screen::Stage { frames: 0, cursor: (0.0, 0.0) };
        }
        Screen::Css
    }

    fn stage(&mut self, frames: u32, cursor: (f32, f32), pads: &[Option<Pad>; 4], pressed: &dyn Fn(usize, Button) -> bool) -> Screen {
        if frames < STAGE_FADE {
            return Screen::Stage { frames: frames + 1, cursor };
        }
        let mut at = cursor;
        for pad in pads.iter().flatten() {
            at = ((at.0 + deflection(pad.main.x) * HAND_SPEED).clamp(-30.0, 30.0), (at.1 + deflection(pad.main.y) * HAND_SPEED).clamp(-20.0, 20.0));
        }
        if (0..4).any(|p| pressed(p, Button::A)) && near(at, lay::FINAL_DESTINATION, (3.0, 2.5)) {
            return self.start_match();
        }
        Screen::Stage { frames: frames + 1, cursor: at }
    }

    /// The match the character-select screen set up: the human port with its coin down
    /// is the bot's, the CPU port the opponent, at the level its slider shows.
    fn start_match(&mut self) -> Screen {
        let human = (0..4).find(|&p| self.ports[p].plugged && self.ports[p].slot == HUMAN);
        let cpu = (0..4).find(|&p| self.ports[p].plugged && self.ports[p].slot == CPU);
        let (Some(agent), Some(cpu)) = (human, cpu) else {
            eprintln!("peer: a match needs one human and one CPU port; staying on stage select");
            return Screen::Stage { frames: STAGE_FADE, cursor: lay::FINAL_DESTINATION };
        };
        let setup = MatchSetup { agent_port: agent, opponent_port: cpu, cpu_level: self.ports[cpu].level, stocks: self.scen.stocks };
        let chosen = |p: usize| self.ports[p].placed.expect("both coins are down");
        self.cast = Some([(agent, chosen(agent)), (cpu, chosen(cpu))]);
        let sim = match Sim::try_new(setup, self.scen.seed.wrapping_add(self.matches)) {
            Ok(sim) => sim,
            Err(e) => {
                eprintln!("peer: cannot start the match {setup:?}: {e}");
                return Screen::Stage { frames: STAGE_FADE, cursor: lay::FINAL_DESTINATION };
            }
        };
        self.matches += 1;
        eprintln!("peer: match {} starts: {setup:?}, {} vs {}", self.matches, lay::GRID[usize::from(chosen(agent))].0, lay::GRID[usize::from(chosen(cpu))].0);
        Screen::InGame { sim: Box::new(sim), paused: false }
    }

    /// Write the menus' bytes (and, in a match, the chosen fighters' ids over the
    /// simulator's own), after the simulator's window has been copied in.
    pub fn publish(&self, w: &mut RamMut) {
        let (major, minor) = match self.screen {
            Screen::Boot => (0x28, 0), // the boot scene: neither a menu nor a match
            Screen::Title => (0, 0),
            Screen::MainMenu { .. } => (1, 0),
            Screen::Css => (2, 0),
            Screen::Stage { .. } => (2, 1),
            Screen::InGame { .. } => (2, 2),
            Screen::Results => (2, 4),
        };
        let _ = w.set_u8(addr::SCENE, major);
        let _ = w.set_u8(addr::MENU, minor);
        // Slots and levels live outside the match's RAM window and always hold.
        for (p, port) in self.ports.iter().enumerate() {
            let _ = w.set_u8(lay::slot(p, 0), port.slot);
            let _ = w.set_u8(lay::slot(p, 2), port.icon);
            let _ = w.set_u8(lay::slot(p, 6), port.holding_slider as u8);
            let _ = w.set_u8(lay::level(p), port.level);
        }
        match &self.screen {
            Screen::MainMenu { sub, sel } => {
                let _ = w.set_u8(lay::SUBMENU, *sub);
                let _ = w.set_u8(lay::SELECTION, *sel);
            }
            Screen::Css => {
                for (p, port) in self.ports.iter().enumerate() {
                    let h = HANDS + 0x100 * p as u32;
                    let state = match (port.plugged, port.holding_coin) {
                        (false, _) => lay::STATE_UNPLUGGED,
                        (true, true) => lay::STATE_HOLDING,
                        // An empty hand is a pointer on the panels below the grid.
                        (true, false) if port.hand.1 < 0.0 => lay::STATE_POINTING,
                        (true, false) => lay::STATE_PLACED,
                    };
                    let _ = w.set_u32(lay::HAND_PTRS + 4 * p as u32, h);
                    let _ = w.set_u32(h, HAND_GOBJ);
                    let _ = w.set_u8(h + lay::HAND_PORT, p as u8);
                    let _ = w.set_u8(h + lay::HAND_STATE, state);
                    let _ = w.set_f32(h + lay::HAND_X, port.hand.0);
                    let _ = w.set_f32(h + lay::HAND_Y, port.hand.1);
                }
                let _ = w.set_u8(lay::READY, self.banner);
            }
            Screen::Stage { frames, cursor } => {
                let _ = w.set_u32(lay::SSS_ROOT, SSS_BLOCKS[0]);
                let _ = w.set_u32(SSS_BLOCKS[0] + 0x10, SSS_BLOCKS[1]);
                // The cursor object appears once the screen has faded in.
                let _ = w.set_u32(SSS_BLOCKS[1] + 0x28, if *frames > 0 { SSS_BLOCKS[2] } else { 0 });
                let _ = w.set_f32(SSS_BLOCKS[2] + 0x38, cursor.0);
                let _ = w.set_f32(SSS_BLOCKS[2] + 0x3C, cursor.1);
            }
            Screen::InGame { sim, .. } => {
                for (p, icon) in self.cast.iter().flatten() {
                    let (_, external, internal) = lay::GRID[usize::from(*icon)];
                    let b = static_block(*p);
                    let _ = w.set_u32(b + static_player::CHARACTER, u32::from(external));
                    if let Ok(f) = sim.ram().u32(b + static_player::FIGHTER_PTR) {
                        let _ = w.set_u32(f + fighter::INTERNAL_CHARACTER, u32::from(internal));
                    }
                }
            }
            _ => {}
        }
        if !self.in_game() {
            // Outside a match the fighter pointers are null, as in Melee's menus.
            for p in 0..4 {
                let _ = w.set_u32(static_block(p) + static_player::FIGHTER_PTR, 0);
            }
        }
    }
}
