//! The peer's Melee: title screen, main menu, character select, stage select, the
//! match (the embedded simulator) with its pause, and the results, written into RAM
//! with the references' layout ([`super::layout`], the peer's own copy): each port has
//! its own hand on its own pipe, the slot byte is in icon order, a CPU's level is set by
//! dragging its slider, START needs the ready banner, a pause can be missed.
//!
//! The hands follow the decompilation (`mncharsel.c`): a hand's state byte reads 1 while
//! it grabs a coin or a slider (a slider until A lets go), else 2 over the grid's band
//! and 0 elsewhere, whether or not its coin is down; a toggle cycles human, CPU, off and
//! ignores a hand that grabs; an open hand entering the grid's band turns its port from
//! off to human, and picks up its coin if its port has no character.
//!
//! A port whose controller is not a pipe (a person's: a `[GCPadN]` device that is not
//! `Pipe/...`, or `SIDeviceN = 12`, the GameCube controller adapter) is played by a
//! stand-in for a person: at each visit of character select it rests `human_wait`
//! frames, then its hand takes its coin to that match's `human_character` (calling the
//! coin back first when it is down on another), sets its slot back to HMN if it is not,
//! and presses START once the banner shows and the bot's slot reads HMN; on stage select it steers the cursor to
//! Final Destination and presses A. In the match the simulator's CPU plays that side at
//! `human_level`. At its first visit it can make one mistake ([`Mistake`]): press its
//! own HMN/CPU toggle and start that match, or press the bot's toggle and START at
//! once; and its controller can be unplugged for a while (`human_unplug`), which the
//! game shows as the decompilation says (`mncharsel.c`): the hand's state 3, the hand
//! hidden and sent home, a coin in hand let go, a human slot turned to CPU; no input
//! from that port until it is plugged back in.
//!
//! Hands move by their port's stick (Melee's dead zone, [`HAND_SPEED`] units a frame at
//! full tilt); menus act on presses (a button down now and up the frame before).

use super::layout::{self as lay, CPU, HUMAN, OFF};
use shine_bridge::pad::Stick;
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
/// Frames "GAME!" holds the finished match on screen before the results.
const GAME_OVER_FRAMES: u32 = 90;
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
    /// Melee's time limit of a stock match, in seconds of play: when it runs out the
    /// match ends ("TIME!") and goes to the results whatever the stocks (`None`: no
    /// limit).
    pub time_limit: Option<u32>,
    /// What each port's slot starts as (`None`: human when plugged, else off).
    pub slots: [Option<u8>; 4],
    /// The person's stand-in: the icons it puts its coin on (match k: the k-th, modulo
    /// their number), the level the simulator's CPU plays its side at, the frames it
    /// rests at each visit of character select, and whether it presses its own
    /// HMN/CPU toggle by mistake at its first visit.
    pub human_icons: Vec<u8>,
    pub human_level: u8,
    pub human_wait: u32,
    pub human_mistake: Mistake,
    /// Frames the person's controller is unplugged at the start of its first visit of
    /// character select (0: never).
    pub human_unplug: u32,
}

/// The mistake the person's stand-in makes at its first visit of character select,
/// its coin down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mistake {
    None,
    /// Presses its own HMN/CPU toggle (its slot becomes a CPU) and starts that match;
    /// sets it back to HMN at the next visit.
    Toggle,
    /// Presses the bot's HMN/CPU toggle (the bot's slot becomes a CPU) and START the
    /// frame after, before the bot's hand can set it back.
    BotToggle,
}

/// What plugs a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plug {
    Nothing,
    /// A bot's pipe.
    Pipe,
    /// A person's controller (the stand-in plays it).
    Person,
}

#[derive(Debug, Clone, Copy)]
struct Port {
    plug: Plug,
    hand: (f32, f32),
    /// What the hand grabs: its own coin, or the CPU slider of a slot.
    grab: Option<Grab>,
    /// The icon the coin is down on.
    placed: Option<u8>,
    /// The slot's character byte: the icon hovered with the coin in hand, else the one
    /// placed on ([`lay::NO_ICON`] before either).
    icon: u8,
    /// Slot type byte: human, CPU, off.
    slot: u8,
    level: u8,
    /// A person's controller pulled out (the hand's state 3, no input).
    unplugged: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grab {
    Coin,
    CpuSlider(usize),
}

impl Port {
    fn plugged(&self) -> bool {
        self.plug != Plug::Nothing
    }
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
        /// Frames since a side lost its last stock ("GAME!": the match stays on screen,
        /// frozen, before the results).
        ended: Option<u32>,
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
    /// Frames played in the current match (its time limit counts them).
    match_frames: u64,
    /// The characters of the match on (bot's port, CPU's port), for the fighter ids.
    cast: Option<[(usize, u8); 2]>,
    /// Whether the match's opponent is an opponent bot's pipe (else the simulator's CPU).
    piped_rival: bool,
    /// Frames since this visit of character select began (the stand-in's rest).
    css_frames: u32,
    /// The match (index) in whose visit the stand-in pressed its toggle by mistake.
    mistake_at: Option<u64>,
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
    pub fn new(scen: MenuScenario, plugs: [Plug; 4]) -> Menus {
        let ports = std::array::from_fn(|p| Port {
            plug: plugs[p],
            hand: (-20.0 + 12.0 * p as f32, -8.0),
            grab: (plugs[p] != Plug::Nothing).then_some(Grab::Coin),
            placed: None,
            icon: lay::NO_ICON,
            slot: scen.slots[p].unwrap_or(if plugs[p] != Plug::Nothing { HUMAN } else { OFF }),
            level: scen.cpu_level_start,
            unplugged: false,
        });
        let missed_left = scen.missed_pauses;
        Menus {
            screen: Screen::Boot,
            ports,
            banner: BANNER_FRAMES,
            prev: [Pad::NEUTRAL; 4],
            scen,
            missed_left,
            matches: 0,
            match_frames: 0,
            cast: None,
            piped_rival: false,
            css_frames: 0,
            mistake_at: None,
        }
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

    /// One frame with these pads (`None`: no pipe on that port; a person's port gets
    /// its stand-in's pad here).
    pub fn frame(&mut self, pipes: &[Option<Pad>; 4]) {
        let mut pads = *pipes;
        self.css_frames = if matches!(self.screen, Screen::Css) { self.css_frames.saturating_add(1) } else { 0 };
        for (p, pad) in pads.iter_mut().enumerate() {
            if self.ports[p].plug == Plug::Person {
                self.plug_in_or_out(p);
                *pad = (!self.ports[p].unplugged).then(|| self.stand_in_pad(p));
            }
        }
        let pads = &pads;
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
            Screen::InGame { sim, ended: Some(n), .. } if n >= GAME_OVER_FRAMES => {
                drop(sim);
                Screen::Results
            }
            Screen::InGame { sim, ended: Some(n), paused } => Screen::InGame { sim, paused, ended: Some(n + 1) },
            Screen::InGame { mut sim, paused, ended: None } => {
                let start = (0..4).find(|&p| pressed(p, Button::Start));
                match (start, paused) {
                    // START with L, R and A held, while paused: quit to character select.
                    (Some(p), true) if [Button::L, Button::R, Button::A].iter().all(|b| pads[p].is_some_and(|pad| pad.pressed(*b))) => Screen::Css,
                    (Some(_), true) => Screen::InGame { sim, paused: false, ended: None },
                    (Some(_), false) if self.missed_left > 0 => {
                        self.missed_left -= 1;
                        eprintln!("peer: missing this pause, as the scenario asks");
                        Screen::InGame { sim, paused: false, ended: None }
                    }
                    (Some(_), false) => Screen::InGame { sim, paused: true, ended: None },
                    (None, true) => Screen::InGame { sim, paused: true, ended: None },
                    (None, false) => {
                        let cast = self.cast.expect("a match has a cast");
                        let [(agent, _), (rival, _)] = cast;
                        let ours = pads[agent].unwrap_or(Pad::NEUTRAL);
                        let _ = if self.piped_rival { sim.step_both(&ours, &pads[rival].unwrap_or(Pad::NEUTRAL)) } else { sim.step(&ours) };
                        let over = cast.iter().any(|(p, _)| sim.ram().player(*p).and_then(|pl| pl.stocks()).is_ok_and(|s| s == 0));
                        self.match_frames += 1;
                        let time_up = self.scen.time_limit.is_some_and(|secs| self.match_frames >= u64::from(secs) * 60);
                        Screen::InGame { sim, paused: false, ended: (over || time_up).then_some(0) }
                    }
                }
            }
            Screen::Results if any(Button::Start) => Screen::Css,
            Screen::Results => Screen::Results,
        };
        self.prev = pads.map(|pad| pad.unwrap_or(Pad::NEUTRAL));
    }

    /// The person's controller on port `p`: pulled out for the first `human_unplug`
    /// frames of its first visit of character select, then put back. Pulled out, the
    /// game does what `mncharsel.c` does once: the hand goes to its corner and hides,
    /// lets go of what it grabs (a coin not on a character goes back to its slot), and
    /// a human slot becomes a CPU.
    fn plug_in_or_out(&mut self, p: usize) {
        let n = self.scen.human_unplug;
        let out = n > 0 && matches!(self.screen, Screen::Css) && self.matches == 0 && self.css_frames <= n;
        let port = &mut self.ports[p];
        if out && !port.unplugged {
            eprintln!("peer: the person's controller is unplugged, as the scenario asks");
            port.hand = (15.0 * p as f32 - 31.0, -21.5);
            if port.grab == Some(Grab::Coin) {
                port.icon = port.placed.unwrap_or(lay::NO_ICON);
            }
            port.grab = None;
            if port.slot == HUMAN {
                port.slot = CPU;
            }
        } else if !out && port.unplugged {
            eprintln!("peer: the person's controller is plugged back in");
        }
        port.unplugged = out;
    }

    /// The person's stand-in (the module's doc says what it does): one frame's pad.
    fn stand_in_pad(&mut self, p: usize) -> Pad {
        let port = self.ports[p];
        // Buttons are tapped: pressed on a frame, released on the next.
        let tap = |b: Button| if self.prev[p].pressed(b) { Pad::NEUTRAL } else { Pad::NEUTRAL.with(b) };
        let toward = |at: (f32, f32), target: (f32, f32)| {
            let (dx, dy) = (target.0 - at.0, target.1 - at.1);
            let m = (dx * dx + dy * dy).sqrt();
            (m > 1.0).then(|| Pad { main: Stick::new(0.5 + 0.5 * dx / m, 0.5 + 0.5 * dy / m), ..Pad::NEUTRAL })
        };
        match self.screen {
            Screen::Css if self.css_frames < self.scen.human_wait => Pad::NEUTRAL,
            Screen::Css => {
                let icons = &self.scen.human_icons;
                let want = icons[(self.matches % icons.len() as u64) as usize];
                if port.placed != Some(want) {
                    if port.grab != Some(Grab::Coin) && port.placed.is_some() {
                        return tap(Button::B); // its coin back to its hand first
                    }
                    return toward(port.hand, lay::icon_centre(want)).unwrap_or_else(|| tap(Button::A));
                }
                // The mistake, once, at the first visit (the match index then).
                let mistake_now = self.mistake_at.is_none() && self.matches == 0;
                match self.scen.human_mistake {
                    Mistake::Toggle if mistake_now && port.slot != HUMAN => {
                        // Made: remember when, and leave the slot as it is.
                        self.mistake_at = Some(self.matches);
                        eprintln!("peer: the person's stand-in pressed its HMN/CPU toggle by mistake");
                        return Pad::NEUTRAL;
                    }
                    Mistake::Toggle if mistake_now => return toward(port.hand, lay::toggle(p)).unwrap_or_else(|| tap(Button::A)),
                    Mistake::BotToggle if mistake_now => {
                        let Some(bot) = (0..4).find(|&q| self.ports[q].plug == Plug::Pipe) else { return Pad::NEUTRAL };
                        if self.ports[bot].slot == HUMAN {
                            return toward(port.hand, lay::toggle(bot)).unwrap_or_else(|| tap(Button::A));
                        }
                        // The bot's slot is a CPU now: START at once, while its hand is
                        // still on its way to set it back.
                        self.mistake_at = Some(self.matches);
                        eprintln!("peer: the person's stand-in pressed the bot's HMN/CPU toggle and START");
                    }
                    _ => {}
                }
                // Its own slot back to HMN whenever it is not (after an unplug, which
                // turned it to CPU), except in the visit of its toggle mistake.
                let keeps_mistake = self.scen.human_mistake == Mistake::Toggle && self.mistake_at == Some(self.matches);
                if port.slot != HUMAN && !keeps_mistake {
                    return toward(port.hand, lay::toggle(p)).unwrap_or_else(|| tap(Button::A));
                }
                // Like a person who looks at the screen: START once the banner shows
                // and the bot's slot reads HMN (its hand is setting it back otherwise),
                // except in the visit of its mistake.
                let bot_is_human = (0..4).filter(|&q| self.ports[q].plug == Plug::Pipe).all(|q| self.ports[q].slot == HUMAN);
                if self.banner == 0 && (bot_is_human || self.mistake_at == Some(self.matches)) {
                    tap(Button::Start)
                } else {
                    Pad::NEUTRAL
                }
            }
            Screen::Stage { frames, cursor } if frames >= STAGE_FADE => toward(cursor, lay::FINAL_DESTINATION).unwrap_or_else(|| tap(Button::A)),
            _ => Pad::NEUTRAL,
        }
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
            if let Some(Grab::CpuSlider(q)) = port.grab {
                // The knob follows the hand along slot q's slider; the level is where it is.
                let base = lay::slider(q, 1).0;
                let knob = port.hand.0.clamp(base, base + lay::SLIDER_OFFSETS[8]);
                self.ports[q].level = (0..9)
                    .min_by(|&a, &b| (base + lay::SLIDER_OFFSETS[a] - knob).abs().total_cmp(&(base + lay::SLIDER_OFFSETS[b] - knob).abs()))
                    .unwrap() as u8
                    + 1;
                if q == p {
                    port.level = self.ports[q].level;
                }
            }
            if pressed(p, Button::A) {
                // A toggle works for a hand that grabs nothing, on a slot whose coin
                // nobody holds (mncharsel.c).
                let coin_held = |q: usize| if q == p { port.grab == Some(Grab::Coin) } else { self.ports[q].grab == Some(Grab::Coin) };
                let toggled = (0..4).find(|&q| near(port.hand, lay::toggle(q), (3.0, 1.5)) && self.ports[q].plugged());
                let slider = (0..4).find(|&q| {
                    let knob = lay::slider(q, self.ports[q].level);
                    let kind = if q == p { port.slot } else { self.ports[q].slot };
                    kind == CPU && (port.hand.0 - knob.0).powi(2) + (port.hand.1 - knob.1).powi(2) < 5.0
                });
                match port.grab {
                    Some(Grab::CpuSlider(_)) => port.grab = None, // A lets go
                    Some(Grab::Coin) => {
                        if let Some(icon) = icon_at(port.hand) {
                            port.grab = None;
                            port.placed = Some(icon);
                            port.icon = icon;
                        }
                    }
                    None => {
                        if let Some(q) = toggled.filter(|&q| !coin_held(q)) {
                            // HMN -> CPU -> off -> HMN, as the game's toggle cycles.
                            let kind = if q == p { &mut port.slot } else { &mut self.ports[q].slot };
                            *kind = match *kind {
                                HUMAN => CPU,
                                CPU => OFF,
                                _ => HUMAN,
                            };
                        } else if let Some(q) = slider {
                            port.grab = Some(Grab::CpuSlider(q));
                        }
                    }
                }
            }
            if pressed(p, Button::B) && port.grab.is_none() && port.placed.is_some() {
                port.grab = Some(Grab::Coin); // its own coin comes back to the hand
                port.placed = None;
            }
            if port.grab.is_none() && lay::GRID_BAND.contains(&port.hand.1) {
                // Entering the grid's band: an off port becomes human, and a port with
                // no character picks its coin up.
                if port.slot == OFF {
                    port.slot = HUMAN;
                }
                if port.placed.is_none() {
                    port.grab = Some(Grab::Coin);
                }
            }
            if port.grab == Some(Grab::Coin) {
                if let Some(icon) = icon_at(port.hand) {
                    port.icon = icon; // the slot shows the character hovered
                }
            }
            self.ports[p] = port;
        }
        let playing: Vec<usize> = (0..4).filter(|&p| self.ports[p].slot != OFF && self.ports[p].plugged()).collect();
        let grabbing = self.ports.iter().any(|p| p.grab.is_some());
        let ready = playing.len() >= 2 && !grabbing && playing.iter().all(|&p| self.ports[p].placed.is_some());
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

    /// The match the character-select screen set up: the bot's port is the piped one,
    /// its opponent the CPU port (at the level its slider shows), the person's, or a
    /// second piped human port (an opponent bot, whose pipe drives the simulator's
    /// opponent). With two piped human ports the bot is the one on Fox, the fighter
    /// the simulator's bot side plays. A bot's port left on CPU is played by the
    /// simulator's CPU, as Melee would.
    fn start_match(&mut self) -> Screen {
        let open = |p: &Port| p.plugged() && p.slot != OFF;
        let piped_human = |p: usize| self.ports[p].plug == Plug::Pipe && open(&self.ports[p]) && self.ports[p].slot == HUMAN;
        let on_fox = |p: usize| self.ports[p].placed.is_some_and(|i| lay::GRID[usize::from(i)].0 == "Fox");
        let bot = (0..4).find(|&p| piped_human(p) && on_fox(p)).or_else(|| (0..4).find(|&p| piped_human(p)));
        let bot = bot.or_else(|| (0..4).find(|&p| self.ports[p].plug == Plug::Pipe && open(&self.ports[p])));
        let rival = (0..4).find(|&p| Some(p) != bot && open(&self.ports[p]) && (self.ports[p].slot == CPU || self.ports[p].plug == Plug::Person || piped_human(p)));
        let (Some(agent), Some(rival)) = (bot, rival) else {
            eprintln!("peer: a match needs the bot's port and one opponent port; staying on stage select");
            return Screen::Stage { frames: STAGE_FADE, cursor: lay::FINAL_DESTINATION };
        };
        let level = if self.ports[rival].slot == CPU { self.ports[rival].level } else { self.scen.human_level };
        self.piped_rival = piped_human(rival);
        let setup = MatchSetup { agent_port: agent, opponent_port: rival, cpu_level: level, stocks: self.scen.stocks };
        let chosen = |p: usize| self.ports[p].placed.expect("both coins are down");
        self.cast = Some([(agent, chosen(agent)), (rival, chosen(rival))]);
        let seed = self.scen.seed.wrapping_add(self.matches);
        let mut sim = match Sim::try_new(setup, seed) {
            Ok(sim) => sim,
            Err(e) => {
                eprintln!("peer: cannot start the match {setup:?}: {e}");
                return Screen::Stage { frames: STAGE_FADE, cursor: lay::FINAL_DESTINATION };
            }
        };
        if self.ports[agent].slot == CPU {
            eprintln!("peer: port {} is a CPU: Melee's CPU plays it, not the pipe", agent + 1);
            sim = sim.with_agent_cpu(self.ports[agent].level.max(1), seed);
        }
        self.matches += 1;
        self.match_frames = 0;
        eprintln!("peer: match {} starts: {setup:?}, {} vs {}", self.matches, lay::GRID[usize::from(chosen(agent))].0, lay::GRID[usize::from(chosen(rival))].0);
        Screen::InGame { sim: Box::new(sim), paused: false, ended: None }
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
            let held = self.ports.iter().any(|h| h.grab == Some(Grab::CpuSlider(p)));
            let _ = w.set_u8(lay::slot(p, lay::P_KIND), port.slot);
            let _ = w.set_u8(lay::slot(p, lay::P_KIND_PREV), port.slot);
            let _ = w.set_u8(lay::slot(p, lay::SEL_ICON), port.icon);
            let _ = w.set_u8(lay::slot(p, lay::HOLD_CPU_SLIDER), held as u8);
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
                    let state = match (port.plugged() && !port.unplugged, port.grab) {
                        (false, _) => lay::STATE_UNPLUGGED,
                        (true, Some(_)) => lay::STATE_GRABBING,
                        (true, None) if lay::GRID_BAND.contains(&port.hand.1) => lay::STATE_OVER_GRID,
                        (true, None) => lay::STATE_OPEN,
                    };
                    let grab = match port.grab {
                        Some(Grab::CpuSlider(q)) => lay::GRAB_CPU_SLIDER + q as u8,
                        _ => p as u8,
                    };
                    let _ = w.set_u32(lay::HAND_PTRS + 4 * p as u32, h);
                    let _ = w.set_u32(h, HAND_GOBJ);
                    let _ = w.set_u8(h + lay::HAND_PORT, p as u8);
                    let _ = w.set_u8(h + lay::HAND_STATE, state);
                    let _ = w.set_u8(h + lay::HAND_GRAB, grab);
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
                    // Who plays each port: its slot's type (a CPU after a toggle pressed
                    // by mistake), which the navigator checks.
                    let _ = w.set_u32(b + static_player::SLOT_TYPE, u32::from(self.ports[*p].slot));
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
