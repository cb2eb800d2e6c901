//! One fighter: per-character stats and the action-state machine, driven only by a
//! [`Pad`] per frame (the bot's and the CPU's alike).
//!
//! The state *is* Melee's action-state id (`crate::melee::action`), so what the RAM
//! shows is exactly what the logic runs on. `frame` counts frames in the current action,
//! 1 on the frame it was entered, like Melee's frame data.
//!
//! Order within a frame (`Fighter::update`): hitlag freezes everything; otherwise the
//! action advances a frame; an action that ran its length ends (into Wait/Fall for
//! *one visible frame* with no input read, so every attack or dodge is followed by an
//! observable idle frame and the frames-in-action counter of a RAM reader resets);
//! inputs may interrupt; the action sets speeds; the fighter moves and meets the stage.

use super::attacks::{Attack, AttackData, Moveset, FOX, MARTH};
use super::input::{Input, InputTracker, SMASH, TILT};
use super::physics::{self, BlastZone, STAGE_EDGE};
use crate::melee::{action as act, characters, Character};
use crate::pad::Pad;

/// A spot dodge or roll: length, intangible frames, and (rolls) travel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dodge {
    pub total: u32,
    pub intangible: (u32, u32),
    /// Frames during which a roll moves, and how far in all.
    pub moving: (u32, u32),
    pub distance: f32,
}

impl Dodge {
    fn speed(&self) -> f32 {
        self.distance / (self.moving.1.saturating_sub(self.moving.0) + 1) as f32
    }
}

/// Per-character constants (Melee's attribute values where they exist).
#[derive(Debug)]
pub struct CharStats {
    /// Which character: the ids written to the static block and the fighter.
    pub character: Character,
    pub weight: f32,
    pub gravity: f32,
    pub terminal_vy: f32,
    pub fastfall_vy: f32,
    pub walk_speed: f32,
    pub dash_initial: f32,
    pub run_speed: f32,
    pub dash_frames: u32,
    pub friction: f32,
    pub jump_squat: u32,
    pub full_hop_vy: f32,
    pub short_hop_vy: f32,
    pub double_jump_vy: f32,
    pub jump_vx: f32,
    pub air_accel: f32,
    pub air_max: f32,
    pub air_friction: f32,
    pub landing_lag: u32,
    pub spotdodge: Dodge,
    pub roll: Dodge,
    /// Hurtbox: a vertical capsule this tall, this wide (radius), from the feet.
    pub height: f32,
    pub radius: f32,
    pub moves: &'static Moveset,
}

pub static FOX_STATS: CharStats = CharStats {
    character: characters::FOX,
    weight: 75.0,
    gravity: 0.23,
    terminal_vy: 2.8,
    fastfall_vy: 3.4,
    walk_speed: 1.6,
    dash_initial: 2.02,
    run_speed: 2.2,
    dash_frames: 11,
    friction: 0.08,
    jump_squat: 3,
    full_hop_vy: 3.68,
    short_hop_vy: 2.1,
    double_jump_vy: 4.0,
    jump_vx: 0.9,
    air_accel: 0.08,
    air_max: 0.83,
    air_friction: 0.02,
    landing_lag: 4,
    spotdodge: Dodge { total: 22, intangible: (2, 15), moving: (0, 0), distance: 0.0 },
    roll: Dodge { total: 30, intangible: (4, 19), moving: (3, 22), distance: 32.0 },
    height: 12.0,
    radius: 4.0,
    moves: &FOX,
};

pub static MARTH_STATS: CharStats = CharStats {
    character: characters::MARTH,
    weight: 87.0,
    gravity: 0.085,
    terminal_vy: 2.2,
    fastfall_vy: 2.5,
    walk_speed: 1.6,
    dash_initial: 1.6,
    run_speed: 1.8,
    dash_frames: 15,
    friction: 0.06,
    jump_squat: 4,
    full_hop_vy: 2.4,
    short_hop_vy: 1.5,
    double_jump_vy: 2.2,
    jump_vx: 0.9,
    air_accel: 0.05,
    air_max: 0.9,
    air_friction: 0.005,
    landing_lag: 4,
    spotdodge: Dodge { total: 24, intangible: (2, 15), moving: (0, 0), distance: 0.0 },
    roll: Dodge { total: 32, intangible: (4, 19), moving: (3, 24), distance: 34.0 },
    height: 16.0,
    radius: 5.0,
    moves: &MARTH,
};

pub const SHIELD_MAX: f32 = 60.0;
const SHIELD_DRAIN: f32 = 0.28;
const SHIELD_REGEN: f32 = 0.07;
const SHIELD_AFTER_BREAK: f32 = 30.0;
const SHIELD_START_LEN: u32 = 2;
const SHIELD_RELEASE_LEN: u32 = 15;
const TURN_LEN: u32 = 8;
/// A turn can be interrupted from this frame: a cross-up costs the victim a few frames.
const TURN_ACTIONABLE: u32 = 4;
const RUN_BRAKE_LEN: u32 = 10;
const CROUCH_CHANGE_LEN: u32 = 4;
const SHINE_INTANGIBLE: u32 = 3;
const SHINE_END_LEN: u32 = 18;
const SHINE_AIR_LEN: u32 = 20;
const AIRDODGE_LEN: u32 = 49;
const AIRDODGE_INTANGIBLE: (u32, u32) = (4, 29);
const AIRDODGE_SPEED: f32 = 3.1;
const LANDING_SPECIAL_LEN: u32 = 10;
const TECH_MISS_LEN: u32 = 26;
const GETUP_LEN: u32 = 30;
const GETUP_INTANGIBLE: u32 = 22;
const SHIELD_BREAK_DOWN_LEN: u32 = 30;
const SHIELD_BREAK_STAND_LEN: u32 = 30;
const DEAD_LEN: u32 = 60;
const HALO_DESCENT_LEN: u32 = 45;
const HALO_WAIT_LEN: u32 = 120;
const HALO_TOP: f32 = 60.0;
const HALO_BOTTOM: f32 = 30.0;
pub const RESPAWN_INVULN: u32 = 120;
const MAX_SMASH_CHARGE: u32 = 60;

fn sign(v: f32) -> f32 {
    if v < 0.0 {
        -1.0
    } else {
        1.0
    }
}

/// A hit taken, as the simulator resolved it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HitTaken {
    pub damage: f32,
    pub kb: f32,
    /// Launch angle (radians) and horizontal direction (+1 right).
    pub angle: f32,
    pub dir: f32,
    pub hitlag: u32,
}

#[derive(Debug, Clone)]
pub struct Fighter {
    pub(crate) stats: &'static CharStats,
    pub(crate) spawn_x: f32,
    pub(crate) action: u32,
    pub(crate) frame: u32,
    /// Length of the current action where it is decided on entry (landing lag, hitstun).
    pub(crate) len: u32,
    pub(crate) x: f32,
    pub(crate) y: f32,
    /// Self-induced speed (ground or air).
    pub(crate) vx: f32,
    pub(crate) vy: f32,
    /// Knockback speed, decaying.
    pub(crate) kb_vx: f32,
    pub(crate) kb_vy: f32,
    pub(crate) facing: f32,
    pub(crate) airborne: bool,
    pub(crate) percent: f32,
    pub(crate) stocks: u8,
    pub(crate) hitlag: u32,
    pub(crate) hitstun: u32,
    pub(crate) jumps_used: u8,
    pub(crate) shield: f32,
    pub(crate) respawn_invuln: u32,
    pub(crate) fastfall: bool,
    pub(crate) attack: Option<Attack>,
    pub(crate) attack_connected: bool,
    pub(crate) charge: u32,
    pub(crate) charging: bool,
    pub(crate) input: InputTracker,
    /// The pad of the last frame (sanitised), for the RAM's pad block.
    pub(crate) pad: Pad,
}

impl Fighter {
    pub fn new(stats: &'static CharStats, x: f32, stocks: u8) -> Fighter {
        Fighter {
            stats,
            spawn_x: x,
            action: act::WAIT,
            frame: 1,
            len: 0,
            x,
            y: 0.0,
            vx: 0.0,
            vy: 0.0,
            kb_vx: 0.0,
            kb_vy: 0.0,
            facing: if x > 0.0 { -1.0 } else { 1.0 },
            airborne: false,
            percent: 0.0,
            stocks,
            hitlag: 0,
            hitstun: 0,
            jumps_used: 0,
            shield: SHIELD_MAX,
            respawn_invuln: 0,
            fastfall: false,
            attack: None,
            attack_connected: false,
            charge: 0,
            charging: false,
            input: InputTracker::default(),
            pad: Pad::NEUTRAL,
        }
    }

    // Read-only accessors (tests, benchmarks, the CPU).
    pub fn stats(&self) -> &'static CharStats {
        self.stats
    }
    pub fn action(&self) -> u32 {
        self.action
    }
    pub fn action_frame(&self) -> u32 {
        self.frame
    }
    pub fn x(&self) -> f32 {
        self.x
    }
    pub fn y(&self) -> f32 {
        self.y
    }
    pub fn facing(&self) -> f32 {
        self.facing
    }
    pub fn airborne(&self) -> bool {
        self.airborne
    }
    pub fn percent(&self) -> f32 {
        self.percent
    }
    pub fn stocks(&self) -> u8 {
        self.stocks
    }
    pub fn hitlag(&self) -> u32 {
        self.hitlag
    }
    pub fn hitstun(&self) -> u32 {
        self.hitstun
    }
    pub fn jumps_used(&self) -> u8 {
        self.jumps_used
    }
    pub fn shield(&self) -> f32 {
        self.shield
    }
    pub fn attack(&self) -> Option<Attack> {
        self.attack
    }
    pub fn velocity(&self) -> (f32, f32) {
        (self.vx, self.vy)
    }
    pub fn kb_velocity(&self) -> (f32, f32) {
        (self.kb_vx, self.kb_vy)
    }
    pub fn charging_smash(&self) -> bool {
        self.charging
    }
    /// The frame data of the attack in progress.
    pub fn attack_data(&self) -> Option<&'static AttackData> {
        self.attack.and_then(|a| self.stats.moves.get(a))
    }

    pub fn is_dead(&self) -> bool {
        act::is_dead(self.action)
    }
    pub fn on_halo(&self) -> bool {
        matches!(self.action, act::ON_HALO_DESCENT | act::ON_HALO_WAIT)
    }

    /// Hitboxes pass through the fighter this frame.
    pub fn is_intangible(&self) -> bool {
        let f = self.frame;
        let within = |(a, b): (u32, u32)| (a..=b).contains(&f);
        self.respawn_invuln > 0
            || self.is_dead()
            || self.on_halo()
            || match self.action {
                act::SPOTDODGE => within(self.stats.spotdodge.intangible),
                act::ROLL_FORWARD | act::ROLL_BACKWARD => within(self.stats.roll.intangible),
                act::AIRDODGE => within(AIRDODGE_INTANGIBLE),
                act::DOWN_B_GROUND_START | act::DOWN_B_AIR_START => f <= SHINE_INTANGIBLE,
                act::GROUND_GETUP => f <= GETUP_INTANGIBLE,
                _ => false,
            }
    }

    pub fn hurtbox(&self) -> super::attacks::Hurtbox {
        super::attacks::Hurtbox { x: self.x, y: self.y, height: self.stats.height, radius: self.stats.radius }
    }

    /// In an airborne state that takes every air input (a double jump, an aerial, an air
    /// dodge, a shine): a jump, a fall or tumble. The other airborne states (an aerial or
    /// air dodge in progress, special fall, hitstun) take none, or one (the air shine: a
    /// double jump).
    pub fn air_actionable(&self) -> bool {
        matches!(
            self.action,
            act::JUMPING_FORWARD
                | act::JUMPING_BACKWARD
                | act::JUMPING_ARIAL_FORWARD
                | act::JUMPING_ARIAL_BACKWARD
                | act::FALLING
                | act::FALLING_AERIAL
                | act::TUMBLING
        )
    }

    pub fn is_shielding(&self) -> bool {
        matches!(self.action, act::SHIELD_START | act::SHIELD | act::SHIELD_STUN) && self.shield > 0.0
    }

    fn in_damage(&self) -> bool {
        (act::DAMAGE_HIGH_1..=0x5B).contains(&self.action)
    }

    fn is_attack_state(&self) -> bool {
        self.attack.is_some_and(|a| a.action() == self.action)
    }

    fn enter(&mut self, action: u32) {
        self.action = action;
        self.frame = 1;
        self.charging = false;
        if !self.is_attack_state() {
            self.attack = None;
        }
    }

    fn enter_len(&mut self, action: u32, len: u32) {
        self.enter(action);
        self.len = len.max(1);
    }

    /// The length of the current action, where it has one.
    fn state_len(&self) -> Option<u32> {
        let s = self.stats;
        Some(match self.action {
            a if self.is_attack_state() && a != act::DOWN_B_GROUND_START => self.attack_data()?.total,
            act::KNEE_BEND => s.jump_squat,
            act::SPOTDODGE => s.spotdodge.total,
            act::ROLL_FORWARD | act::ROLL_BACKWARD => s.roll.total,
            act::SHIELD_START => SHIELD_START_LEN,
            act::SHIELD_RELEASE => SHIELD_RELEASE_LEN,
            act::TURNING => TURN_LEN,
            act::DASHING => s.dash_frames,
            act::RUN_BRAKE => RUN_BRAKE_LEN,
            act::CROUCH_START | act::CROUCH_END => CROUCH_CHANGE_LEN,
            act::DOWN_B_GROUND_START => SHINE_INTANGIBLE,
            act::DOWN_B_GROUND_END => SHINE_END_LEN,
            act::DOWN_B_AIR_START => SHINE_AIR_LEN,
            act::AIRDODGE => AIRDODGE_LEN,
            act::TECH_MISS_UP => TECH_MISS_LEN,
            act::GROUND_GETUP => GETUP_LEN,
            act::SHIELD_BREAK_DOWN_U => SHIELD_BREAK_DOWN_LEN,
            act::SHIELD_BREAK_STAND_U => SHIELD_BREAK_STAND_LEN,
            act::ON_HALO_DESCENT => HALO_DESCENT_LEN,
            act::ON_HALO_WAIT => HALO_WAIT_LEN,
            a if act::is_dead(a) => {
                if self.stocks == 0 {
                    return None;
                }
                DEAD_LEN
            }
            act::LANDING | act::LANDING_SPECIAL | act::SHIELD_STUN | act::SHIELD_BREAK_TEETER => self.len,
            act::NAIR_LANDING..=act::DAIR_LANDING => self.len,
            a if (act::DAMAGE_HIGH_1..=0x5B).contains(&a) => self.len,
            _ => return None,
        })
    }

    /// Advance one frame with `pad` held.
    pub(crate) fn update(&mut self, pad: &Pad) {
        self.pad = super::input::sanitize(pad);
        let i = self.input.read(pad);
        if self.hitlag > 0 {
            self.hitlag -= 1;
            return;
        }
        self.respawn_invuln = self.respawn_invuln.saturating_sub(1);
        self.hitstun = self.hitstun.saturating_sub(1);
        self.advance(&i);
        let mut can_act = true;
        if self.state_len().is_some_and(|len| self.frame > len) {
            can_act = self.finish(&i);
        }
        if can_act {
            self.interrupt(&i);
        }
        self.motion(&i);
        self.integrate();
        self.tick_shield();
    }

    fn advance(&mut self, i: &Input) {
        if let Some(data) = self.attack_data().filter(|_| self.is_attack_state()) {
            let holding = i.a || i.cx.abs().max(i.cy.abs()) >= SMASH;
            if data.charge_frame > 0 && self.frame == data.charge_frame && holding && self.charge < MAX_SMASH_CHARGE {
                self.charging = true;
                self.charge += 1;
                return;
            }
        }
        self.charging = false;
        self.frame = self.frame.saturating_add(1);
    }

    /// The current action ran its length. Returns whether inputs may act this frame.
    fn finish(&mut self, i: &Input) -> bool {
        match self.action {
            act::KNEE_BEND => {
                self.take_off(i);
                true
            }
            act::DASHING if i.x * self.facing >= TILT => {
                self.enter(act::RUNNING);
                true
            }
            act::CROUCH_START => {
                self.enter(act::CROUCHING);
                true
            }
            act::SHIELD_START => {
                self.enter(act::SHIELD);
                true
            }
            act::SHIELD_STUN => {
                self.enter(if i.shield { act::SHIELD } else { act::SHIELD_RELEASE });
                true
            }
            act::DOWN_B_GROUND_START => {
                self.enter(if i.b { act::DOWN_B_GROUND } else { act::DOWN_B_GROUND_END });
                true
            }
            act::SPOTDODGE | act::ROLL_FORWARD | act::ROLL_BACKWARD => {
                if self.action == act::ROLL_FORWARD {
                    // A forward roll ends facing back the way it came.
                    self.facing = -self.facing;
                }
                if i.shield {
                    self.enter(act::SHIELD);
                } else {
                    self.idle();
                }
                false
            }
            act::AIRDODGE => {
                self.enter(act::DEAD_FALL);
                false
            }
            act::TECH_MISS_UP => {
                self.enter(act::GROUND_GETUP);
                false
            }
            act::SHIELD_BREAK_DOWN_U => {
                self.enter(act::SHIELD_BREAK_STAND_U);
                false
            }
            act::SHIELD_BREAK_STAND_U => {
                let dizzy = (400.0 - self.percent).max(100.0) as u32;
                self.enter_len(act::SHIELD_BREAK_TEETER, dizzy);
                false
            }
            act::SHIELD_BREAK_TEETER => {
                self.shield = SHIELD_AFTER_BREAK;
                self.idle();
                false
            }
            act::ON_HALO_DESCENT => {
                self.enter(act::ON_HALO_WAIT);
                true
            }
            act::ON_HALO_WAIT => {
                self.leave_halo();
                false
            }
            a if act::is_dead(a) => {
                self.respawn();
                false
            }
            a if (act::DAMAGE_FLY_HIGH..=0x5B).contains(&a) => {
                self.enter(act::TUMBLING);
                true
            }
            _ => {
                self.idle();
                false
            }
        }
    }

    /// Wait on the ground, Fall in the air.
    fn idle(&mut self) {
        if self.airborne {
            self.enter(if self.jumps_used >= 2 { act::FALLING_AERIAL } else { act::FALLING });
        } else {
            self.enter(act::WAIT);
        }
    }

    fn interrupt(&mut self, i: &Input) {
        match self.action {
            act::WAIT | act::WALK_SLOW | act::WALK_MIDDLE | act::WALK_FAST | act::CROUCHING | act::CROUCH_START | act::CROUCH_END => {
                self.ground_actions(i, true);
            }
            act::TURNING if self.frame >= TURN_ACTIONABLE => self.ground_actions(i, true),
            act::RUN_BRAKE => {
                self.ground_actions(i, false);
            }
            act::DASHING | act::RUNNING => self.run_actions(i),
            act::SHIELD_START | act::SHIELD => self.shield_actions(i),
            act::DOWN_B_GROUND | act::DOWN_B_GROUND_END => {
                if i.jump_press {
                    self.enter(act::KNEE_BEND);
                } else if self.action == act::DOWN_B_GROUND && !i.b {
                    self.enter(act::DOWN_B_GROUND_END);
                }
            }
            act::DOWN_B_AIR_START if self.frame > SHINE_INTANGIBLE && i.jump_press && self.jumps_used < 2 => self.double_jump(i),
            _ if self.air_actionable() => self.air_actions(i),
            act::ON_HALO_WAIT if i.any => self.leave_halo(),
            _ => {}
        }
    }

    fn wants_shine(&self, i: &Input) -> bool {
        i.b_press && i.y <= -0.5 && i.y.abs() >= i.x.abs() && self.stats.moves.shine.is_some()
    }

    /// Inputs from standing-like states. `full`: everything, else only jump/shield/shine.
    fn ground_actions(&mut self, i: &Input, full: bool) {
        if self.wants_shine(i) {
            self.start_attack(Attack::Shine);
        } else if i.jump_press {
            self.enter(act::KNEE_BEND);
        } else if i.shield {
            if i.shield_press && i.y <= -SMASH && i.y.abs() > i.x.abs() {
                self.enter(act::SPOTDODGE);
            } else if i.shield_press && i.x.abs() >= SMASH {
                self.roll(i.x);
            } else {
                self.enter(act::SHIELD_START);
            }
        } else if !full {
            // Run brake: only the above.
        } else if i.c_press {
            let a = if i.cx.abs() >= i.cy.abs() {
                self.facing = sign(i.cx);
                Attack::Fsmash
            } else if i.cy > 0.0 {
                Attack::Usmash
            } else {
                Attack::Dsmash
            };
            self.start_attack(a);
        } else if i.a_press {
            let (ax, ay) = (i.x.abs(), i.y.abs());
            if i.smash_x {
                self.facing = sign(i.x);
                self.start_attack(Attack::Fsmash);
            } else if ay >= ax && i.y >= TILT {
                self.start_attack(Attack::Utilt);
            } else if ay >= ax && i.y <= -TILT {
                self.start_attack(Attack::Dtilt);
            } else if ax >= TILT && sign(i.x) != self.facing {
                self.turn();
            } else if ax >= TILT {
                self.start_attack(Attack::Ftilt);
            } else {
                self.start_attack(Attack::Jab);
            }
        } else if i.x.abs() >= SMASH && i.smash_x {
            self.facing = sign(i.x);
            self.enter(act::DASHING);
            self.vx = self.facing * self.stats.dash_initial;
        } else if i.x.abs() >= TILT && i.x.abs() >= i.y.abs() {
            if sign(i.x) != self.facing {
                self.turn();
            } else {
                let walk = if i.x.abs() < 0.5 {
                    act::WALK_SLOW
                } else if i.x.abs() < 0.8 {
                    act::WALK_MIDDLE
                } else {
                    act::WALK_FAST
                };
                if walk != self.action {
                    self.enter(walk);
                }
            }
        } else if i.y <= -SMASH {
            if !matches!(self.action, act::CROUCH_START | act::CROUCHING) {
                self.enter(act::CROUCH_START);
            }
        } else if matches!(self.action, act::CROUCHING) {
            self.enter(act::CROUCH_END);
        } else if matches!(self.action, act::WALK_SLOW | act::WALK_MIDDLE | act::WALK_FAST) {
            self.enter(act::WAIT);
        }
    }

    fn turn(&mut self) {
        self.facing = -self.facing;
        self.enter(act::TURNING);
    }

    fn roll(&mut self, stick_x: f32) {
        let forward = sign(stick_x) == self.facing;
        self.enter(if forward { act::ROLL_FORWARD } else { act::ROLL_BACKWARD });
    }

    fn run_actions(&mut self, i: &Input) {
        if self.wants_shine(i) {
            self.start_attack(Attack::Shine);
        } else if i.jump_press {
            self.enter(act::KNEE_BEND);
        } else if i.shield {
            self.enter(act::SHIELD_START);
        } else if i.a_press {
            self.start_attack(Attack::DashAttack);
        } else if self.action == act::DASHING && i.smash_x && sign(i.x) != self.facing {
            // Dash back (dash dancing).
            self.facing = -self.facing;
            self.enter(act::DASHING);
            self.vx = self.facing * self.stats.dash_initial;
        } else if self.action == act::RUNNING && i.x * self.facing < TILT {
            self.enter(act::RUN_BRAKE);
        }
    }

    fn shield_actions(&mut self, i: &Input) {
        if i.jump_press {
            self.enter(act::KNEE_BEND);
        } else if i.y <= -SMASH && i.y.abs() > i.x.abs() {
            self.enter(act::SPOTDODGE);
        } else if i.x.abs() >= SMASH {
            self.roll(i.x);
        } else if !i.shield {
            self.enter(act::SHIELD_RELEASE);
        }
    }

    fn air_actions(&mut self, i: &Input) {
        if self.wants_shine(i) {
            self.attack = Some(Attack::Shine);
            self.attack_connected = false;
            // One state for the whole air shine: Melee splits it into start, loop and
            // end (0x16D..=0x170); the simulator keeps the start's id throughout.
            self.enter(act::DOWN_B_AIR_START);
            self.vx *= 0.5;
            self.vy = 0.0;
            self.fastfall = false;
        } else if i.jump_press && self.jumps_used < 2 {
            self.double_jump(i);
        } else if i.shield_press {
            self.air_dodge(i);
        } else if i.a_press || i.c_press {
            let (dx, dy) = if i.c_press { (i.cx, i.cy) } else { (i.x, i.y) };
            let a = if dx.abs().max(dy.abs()) < TILT {
                Attack::Nair
            } else if dx.abs() >= dy.abs() {
                if sign(dx) == self.facing {
                    Attack::Fair
                } else {
                    Attack::Bair
                }
            } else if dy > 0.0 {
                Attack::Uair
            } else {
                Attack::Dair
            };
            self.start_attack(a);
        }
    }

    fn start_attack(&mut self, a: Attack) {
        self.attack = Some(a);
        self.attack_connected = false;
        self.charge = 0;
        self.enter(a.action());
    }

    fn take_off(&mut self, i: &Input) {
        let s = self.stats;
        self.airborne = true;
        self.jumps_used = 1;
        self.fastfall = false;
        self.vy = if i.jump { s.full_hop_vy } else { s.short_hop_vy };
        let drift = if i.x.abs() >= TILT { i.x * s.jump_vx } else { 0.0 };
        self.vx = (self.vx * 0.8 + drift).clamp(-s.air_max * 1.5, s.air_max * 1.5);
        self.enter(if i.x * self.facing <= -TILT { act::JUMPING_BACKWARD } else { act::JUMPING_FORWARD });
    }

    fn double_jump(&mut self, i: &Input) {
        let s = self.stats;
        self.jumps_used = 2;
        self.fastfall = false;
        self.vy = s.double_jump_vy;
        self.vx = if i.x.abs() >= TILT { i.x * s.air_max } else { self.vx * 0.5 };
        self.kb_vx = 0.0;
        self.kb_vy = 0.0;
        self.enter(if i.x * self.facing <= -TILT { act::JUMPING_ARIAL_BACKWARD } else { act::JUMPING_ARIAL_FORWARD });
    }

    fn air_dodge(&mut self, i: &Input) {
        let mag = (i.x * i.x + i.y * i.y).sqrt();
        (self.vx, self.vy) = if mag >= TILT { (i.x / mag * AIRDODGE_SPEED, i.y / mag * AIRDODGE_SPEED) } else { (0.0, 0.0) };
        self.fastfall = false;
        self.enter(act::AIRDODGE);
    }

    /// Self speeds for this frame, by action.
    fn motion(&mut self, i: &Input) {
        let s = self.stats;
        if self.is_dead() || self.on_halo() {
            return;
        }
        if !self.airborne {
            self.vy = 0.0;
            let target = match self.action {
                act::WALK_SLOW | act::WALK_MIDDLE | act::WALK_FAST => Some(self.facing * s.walk_speed * i.x.abs().min(1.0)),
                act::DASHING if i.x * self.facing >= TILT => Some(self.facing * s.run_speed),
                act::RUNNING => Some(self.facing * s.run_speed),
                act::ROLL_FORWARD | act::ROLL_BACKWARD => {
                    let dir = if self.action == act::ROLL_FORWARD { self.facing } else { -self.facing };
                    let (a, b) = s.roll.moving;
                    self.vx = if (a..=b).contains(&self.frame) { dir * s.roll.speed() } else { 0.0 };
                    return;
                }
                _ => None,
            };
            self.vx = match target {
                Some(t) => physics::approach(self.vx, t, s.friction * 2.0),
                None => physics::approach(self.vx, 0.0, s.friction),
            };
            return;
        }
        match self.action {
            act::AIRDODGE => {
                self.vx *= 0.9;
                self.vy *= 0.9;
                return;
            }
            act::DOWN_B_AIR_START => {
                // The air shine stalls: a slow fall.
                self.vy = (self.vy - s.gravity * 0.25).max(-s.terminal_vy * 0.5);
                return;
            }
            _ => {}
        }
        let can_drift = !self.in_damage() && !matches!(self.action, act::SHIELD_BREAK_FLY | act::SHIELD_BREAK_FALL);
        if can_drift {
            let max = if self.action == act::DEAD_FALL { s.air_max * 0.6 } else { s.air_max };
            self.vx = if i.x.abs() >= TILT {
                let t = i.x * max;
                if self.vx.abs() > max && sign(self.vx) == sign(t) {
                    physics::approach(self.vx, t, s.air_friction)
                } else {
                    physics::approach(self.vx, t, s.air_accel)
                }
            } else {
                physics::approach(self.vx, 0.0, s.air_friction)
            };
        }
        if self.vy <= 0.0 && i.y <= -SMASH && can_drift && !self.fastfall {
            self.fastfall = true;
        }
        self.vy = if self.fastfall { -s.fastfall_vy } else { (self.vy - s.gravity).max(-s.terminal_vy) };
        match self.action {
            act::JUMPING_FORWARD | act::JUMPING_BACKWARD if self.vy <= 0.0 => self.enter(act::FALLING),
            act::JUMPING_ARIAL_FORWARD | act::JUMPING_ARIAL_BACKWARD if self.vy <= 0.0 => self.enter(act::FALLING_AERIAL),
            act::SHIELD_BREAK_FLY if self.vy <= 0.0 => self.enter(act::SHIELD_BREAK_FALL),
            _ => {}
        }
    }

    /// Ground states that may carry a fighter off the stage.
    fn may_leave_stage(&self) -> bool {
        matches!(self.action, act::DASHING | act::RUNNING | act::DASH_ATTACK) || self.in_damage()
    }

    /// Move, meet the stage, die past a blast zone.
    fn integrate(&mut self) {
        if self.is_dead() {
            return;
        }
        if self.on_halo() {
            let t = if self.action == act::ON_HALO_DESCENT { (self.frame as f32 / HALO_DESCENT_LEN as f32).min(1.0) } else { 1.0 };
            self.x = self.spawn_x;
            self.y = HALO_TOP + (HALO_BOTTOM - HALO_TOP) * t;
            return;
        }
        if !self.airborne {
            let nx = self.x + self.vx + self.kb_vx;
            self.kb_vx = physics::approach(self.kb_vx, 0.0, self.stats.friction);
            self.kb_vy = 0.0;
            if nx.abs() <= STAGE_EDGE {
                self.x = nx;
            } else if self.may_leave_stage() {
                self.x = nx;
                self.airborne = true;
                self.jumps_used = self.jumps_used.max(1);
                if !self.in_damage() {
                    self.attack = None;
                    self.enter(act::FALLING);
                }
            } else {
                self.x = nx.clamp(-STAGE_EDGE, STAGE_EDGE);
                self.vx = 0.0;
            }
            return;
        }
        let (ox, oy) = (self.x, self.y);
        let (nx, ny) = (ox + self.vx + self.kb_vx, oy + self.vy + self.kb_vy);
        (self.kb_vx, self.kb_vy) = physics::decay(self.kb_vx, self.kb_vy);
        if ny <= 0.0 && oy >= 0.0 && nx.abs() <= STAGE_EDGE && self.vy + self.kb_vy <= 0.0 {
            self.x = nx;
            self.land();
        } else if ny < 0.0 && nx.abs() < STAGE_EDGE {
            // The stage's side is a wall below the surface.
            self.x = sign(ox) * STAGE_EDGE;
            self.y = ny;
            self.vx = 0.0;
            self.kb_vx = 0.0;
        } else {
            self.x = nx;
            self.y = ny;
        }
        if let Some(zone) = physics::blast_zone(self.x, self.y) {
            self.die(zone);
        }
    }

    fn land(&mut self) {
        self.y = 0.0;
        self.airborne = false;
        self.jumps_used = 0;
        self.fastfall = false;
        self.vy = 0.0;
        self.kb_vy = 0.0;
        let aerial_lag =
            self.attack.filter(|a| a.is_aerial() && self.is_attack_state()).and_then(|a| Some((a.landing_action()?, self.stats.moves.get(a)?.landing_lag)));
        if let Some((landing, lag)) = aerial_lag {
            self.attack = None;
            self.enter_len(landing, lag);
            return;
        }
        match self.action {
            act::AIRDODGE | act::DEAD_FALL => self.enter_len(act::LANDING_SPECIAL, LANDING_SPECIAL_LEN),
            act::TUMBLING | act::DAMAGE_FLY_HIGH..=0x5B => {
                self.kb_vx *= 0.5;
                self.enter(act::TECH_MISS_UP);
            }
            a if self.in_damage() && a < act::DAMAGE_FLY_HIGH => {
                let left = self.hitstun.max(1);
                self.enter_len(act::DAMAGE_NEUTRAL_1, left);
            }
            act::SHIELD_BREAK_FLY | act::SHIELD_BREAK_FALL => self.enter(act::SHIELD_BREAK_DOWN_U),
            _ => self.enter_len(act::LANDING, self.stats.landing_lag),
        }
    }

    fn die(&mut self, zone: BlastZone) {
        self.stocks = self.stocks.saturating_sub(1);
        self.x = self.x.clamp(physics::BLAST_LEFT, physics::BLAST_RIGHT);
        self.y = self.y.clamp(physics::BLAST_BOTTOM, physics::BLAST_TOP);
        (self.vx, self.vy, self.kb_vx, self.kb_vy) = (0.0, 0.0, 0.0, 0.0);
        self.hitstun = 0;
        self.hitlag = 0;
        self.attack = None;
        self.enter(match zone {
            BlastZone::Left => act::DEAD_LEFT,
            BlastZone::Right => act::DEAD_RIGHT,
            BlastZone::Top => act::DEAD_UP,
            BlastZone::Bottom => act::DEAD_DOWN,
        });
    }

    fn respawn(&mut self) {
        self.percent = 0.0;
        self.shield = SHIELD_MAX;
        self.airborne = true;
        self.jumps_used = 1;
        self.fastfall = false;
        self.facing = if self.spawn_x > 0.0 { -1.0 } else { 1.0 };
        self.x = self.spawn_x;
        self.y = HALO_TOP;
        self.enter(act::ON_HALO_DESCENT);
    }

    fn leave_halo(&mut self) {
        self.respawn_invuln = RESPAWN_INVULN;
        self.vy = 0.0;
        self.enter(act::FALLING);
    }

    fn tick_shield(&mut self) {
        if matches!(self.action, act::SHIELD_START | act::SHIELD) {
            self.shield -= SHIELD_DRAIN;
            if self.shield <= 0.0 {
                self.break_shield();
            }
        } else if !matches!(self.action, act::SHIELD_STUN | act::SHIELD_BREAK_FLY..=act::SHIELD_BREAK_TEETER) {
            self.shield = (self.shield + SHIELD_REGEN).min(SHIELD_MAX);
        }
    }

    fn break_shield(&mut self) {
        self.shield = 0.0;
        self.airborne = true;
        self.vy = 2.5;
        self.vx = 0.0;
        self.enter(act::SHIELD_BREAK_FLY);
    }

    /// Hitboxes this fighter has out this frame (none once its attack connected).
    pub fn active_hitboxes(&self) -> impl Iterator<Item = &'static super::attacks::Hitbox> + '_ {
        let live = self.is_attack_state() && !self.attack_connected && !self.charging || self.action == act::DOWN_B_AIR_START && !self.attack_connected;
        let frame = self.frame;
        self.attack_data().filter(|_| live).into_iter().flat_map(move |d| d.hitboxes.iter().filter(move |h| h.active(frame)))
    }

    /// Damage multiplier of a charged smash.
    pub(crate) fn charge_multiplier(&self) -> f32 {
        1.0 + 0.367 * self.charge as f32 / MAX_SMASH_CHARGE as f32
    }

    /// Take a hit that was not shielded.
    pub(crate) fn take_hit(&mut self, damage: f32, kb: f32, angle: f32, dir: f32, hitlag: u32) -> HitTaken {
        self.percent = (self.percent + damage).min(999.0);
        self.hitlag = hitlag;
        let speed = kb * physics::KB_SPEED;
        self.kb_vx = angle.cos() * speed * dir;
        self.kb_vy = angle.sin() * speed;
        self.vx = 0.0;
        self.vy = 0.0;
        self.fastfall = false;
        self.attack = None;
        let stun = physics::hitstun(kb);
        self.hitstun = stun;
        if self.kb_vy > 0.0 && (self.airborne || kb >= 25.0) {
            self.airborne = true;
            self.y = self.y.max(0.01);
        }
        let tumble = kb >= physics::TUMBLE_KB;
        let action = if tumble {
            if angle.to_degrees() >= 70.0 {
                act::DAMAGE_FLY_TOP
            } else if angle.to_degrees() >= 40.0 {
                act::DAMAGE_FLY_HIGH
            } else {
                act::DAMAGE_FLY_NEUTRAL
            }
        } else if self.airborne {
            act::DAMAGE_AIR_1
        } else {
            act::DAMAGE_NEUTRAL_1
        };
        self.enter_len(action, stun);
        if self.airborne {
            // A hit refreshes nothing: a fighter launched has used its ground jump.
            self.jumps_used = self.jumps_used.max(1);
        }
        HitTaken { damage, kb, angle, dir, hitlag }
    }

    /// Take a hit on the shield.
    pub(crate) fn shield_hit(&mut self, damage: f32, dir: f32, hitlag: u32) {
        self.shield -= damage;
        self.hitlag = hitlag;
        self.kb_vx = dir * (0.2 + damage * 0.05);
        if self.shield <= 0.0 {
            self.break_shield();
        } else {
            self.enter_len(act::SHIELD_STUN, physics::shield_stun(damage));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pad::Button;

    pub(crate) fn run(f: &mut Fighter, pad: Pad, n: usize) {
        for _ in 0..n {
            f.update(&pad);
        }
    }

    #[test]
    fn returns_to_wait_when_idle() {
        let mut f = Fighter::new(&FOX_STATS, 0.0, 4);
        run(&mut f, Pad::NEUTRAL.with_main(1.0, 0.5), 30);
        assert_eq!(f.action, act::RUNNING);
        assert!(f.x > 30.0);
        run(&mut f, Pad::NEUTRAL, 1);
        assert_eq!(f.action, act::RUN_BRAKE);
        run(&mut f, Pad::NEUTRAL.with(Button::A), 1);
        run(&mut f, Pad::NEUTRAL, 60);
        assert_eq!(f.action, act::WAIT);
        let x = f.x;
        run(&mut f, Pad::NEUTRAL, 60);
        assert_eq!((f.action, f.x), (act::WAIT, x), "standing still stays in Wait");
    }

    #[test]
    fn jumps_used_counts_and_resets_on_landing() {
        let mut f = Fighter::new(&FOX_STATS, 0.0, 4);
        let x = Pad::NEUTRAL.with(Button::X);
        f.update(&x);
        assert_eq!(f.action, act::KNEE_BEND);
        assert_eq!(f.jumps_used, 0);
        run(&mut f, x, 3);
        assert!(f.airborne);
        assert_eq!(f.jumps_used, 1);
        run(&mut f, Pad::NEUTRAL, 5);
        f.update(&x);
        assert_eq!(f.jumps_used, 2);
        assert_eq!(f.action, act::JUMPING_ARIAL_FORWARD);
        run(&mut f, Pad::NEUTRAL, 2);
        f.update(&x);
        assert_eq!(f.jumps_used, 2, "no third jump");
        run(&mut f, Pad::NEUTRAL, 200);
        assert!(!f.airborne);
        assert_eq!((f.jumps_used, f.action), (0, act::WAIT));
    }

    #[test]
    fn shield_shrinks_while_held_and_regenerates() {
        let mut f = Fighter::new(&MARTH_STATS, 0.0, 4);
        let l = Pad::NEUTRAL.with(Button::L).with_l(1.0);
        run(&mut f, l, 60);
        assert_eq!(f.action, act::SHIELD);
        assert!((f.shield - (SHIELD_MAX - 60.0 * SHIELD_DRAIN)).abs() < 1e-3, "{}", f.shield);
        let held = f.shield;
        run(&mut f, Pad::NEUTRAL, 60);
        assert!(f.shield > held);
        assert_eq!(f.action, act::WAIT);
        // Held long enough, it breaks.
        run(&mut f, l, 400);
        assert!(matches!(f.action, act::SHIELD_BREAK_FLY..=act::SHIELD_BREAK_TEETER), "{:#x}", f.action);
    }

    #[test]
    fn spot_dodge_and_roll_are_intangible_mid_way() {
        let mut f = Fighter::new(&FOX_STATS, 0.0, 4);
        let dodge = Pad { main: crate::pad::Stick::new(0.5, 0.0), ..Pad::NEUTRAL.with(Button::L).with_l(1.0) };
        f.update(&dodge);
        assert_eq!(f.action, act::SPOTDODGE);
        assert!(!f.is_intangible(), "frame 1 is not intangible");
        f.update(&dodge);
        assert!(f.is_intangible());
        run(&mut f, Pad::NEUTRAL, 13);
        assert!(f.is_intangible() && f.frame == 15);
        f.update(&Pad::NEUTRAL);
        assert!(!f.is_intangible());
        run(&mut f, Pad::NEUTRAL, 7);
        assert_eq!(f.action, act::WAIT);
        let roll = Pad { main: crate::pad::Stick::new(0.0, 89.0 / 255.0), ..Pad::NEUTRAL.with(Button::L).with_l(1.0) };
        f.update(&roll);
        assert_eq!(f.action, act::ROLL_BACKWARD, "Fox at x = 0 faces right");
        run(&mut f, Pad::NEUTRAL, 5);
        assert!(f.is_intangible());
        run(&mut f, Pad::NEUTRAL, 30);
        assert_eq!(f.action, act::WAIT);
        assert!(f.x < -25.0, "rolled left to {}", f.x);
    }

    #[test]
    fn shine_then_jump_out() {
        let mut f = Fighter::new(&FOX_STATS, 0.0, 4);
        let down = crate::pad::Stick::new(0.5, 0.0);
        f.update(&Pad { main: down, ..Pad::NEUTRAL.with(Button::B) });
        assert_eq!(f.action, act::DOWN_B_GROUND_START);
        assert!(f.is_intangible());
        assert_eq!(f.active_hitboxes().count(), 1);
        run(&mut f, Pad { main: down, ..Pad::NEUTRAL }, 2);
        f.update(&Pad::NEUTRAL.with(Button::X));
        assert_eq!(f.action, act::KNEE_BEND, "jump-cancelled on frame 4");
        run(&mut f, Pad::NEUTRAL, 3);
        assert!(f.airborne);
    }

    #[test]
    fn walking_does_not_leave_the_stage_but_running_does() {
        let mut f = Fighter::new(&MARTH_STATS, 80.0, 4);
        f.facing = 1.0;
        run(&mut f, Pad::NEUTRAL.with_main(0.75, 0.5), 60);
        assert!(!f.airborne && f.x <= STAGE_EDGE);
        let mut g = Fighter::new(&MARTH_STATS, 60.0, 4);
        run(&mut g, Pad::NEUTRAL.with_main(1.0, 0.5), 40);
        assert!(g.airborne && g.x > STAGE_EDGE);
    }
}
