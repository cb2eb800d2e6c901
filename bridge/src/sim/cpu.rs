//! The scripted CPU opponent, levels 1-9. It produces a [`Pad`] every frame, so the
//! fighter logic treats it exactly like the bot.
//!
//! What it knows: its own state now, and the bot's state only as it was `delay` frames
//! ago (a short history of snapshots; it never sees the bot's pad). Level 9 reacts
//! after 4-8 frames, attacks whenever a fitting attack reaches, spaces with its reach,
//! sometimes whiffs on purpose just outside the bot's range (a bait), and sometimes
//! waits out a dodge it saw to hit its end. Level 1 reacts after about half a second,
//! rarely attacks and often stands idle. All randomness comes from the simulator's
//! seeded RNG.

use super::attacks::{hitbox_touches, Attack, Hurtbox};
use super::fighter::{CharStats, Fighter};
use super::physics::STAGE_EDGE;
use crate::melee::action as act;
use crate::pad::{Button, Pad, Stick};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Snapshots kept; the longest delay must fit.
const HISTORY: usize = 64;

/// The bot as the CPU saw it at the end of some frame.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Seen {
    pub x: f32,
    pub y: f32,
    pub action: u32,
    pub frame: u32,
    pub airborne: bool,
    pub intangible: bool,
}

impl Seen {
    pub fn of(f: &Fighter) -> Seen {
        Seen { x: f.x(), y: f.y(), action: f.action(), frame: f.action_frame(), airborne: f.airborne(), intangible: f.is_intangible() }
    }
}

/// How a level plays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelParams {
    /// Reaction delay in frames, sampled uniformly from this range for each decision.
    pub delay: (u32, u32),
    /// Chance per frame to attack when an attack reaches.
    pub attack_chance: f32,
    /// Chance per second of standing idle for a while.
    pub idle_chance: f32,
    /// Chance to pick the fitting attack rather than any attack.
    pub accuracy: f32,
    /// Chance to wait out a dodge it saw and hit its end.
    pub punish_chance: f32,
    /// Chance, per approach, to whiff just outside the bot's reach.
    pub bait_chance: f32,
    /// Chance, per approach, to come in with a short-hop aerial.
    pub aerial_chance: f32,
}

impl LevelParams {
    pub fn for_level(level: u8) -> LevelParams {
        let t = (level.clamp(1, 9) - 1) as f32 / 8.0;
        LevelParams {
            delay: ((24.0 - 20.0 * t).round() as u32, (36.0 - 28.0 * t).round() as u32),
            attack_chance: 0.004 + 0.996 * t * t * t,
            idle_chance: 0.6 * (1.0 - t),
            accuracy: 0.4 + 0.55 * t,
            punish_chance: 0.6 * t * t,
            bait_chance: 0.3 * t * t,
            aerial_chance: 0.05 + 0.1 * t,
        }
    }
}

/// What the CPU is working toward.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    /// Get in range for `attack`, then use it; with `bait`, use it a little early.
    Attack { attack: Attack, bait: bool },
    /// Short hop toward the bot and use a forward aerial.
    Aerial,
}

pub struct Cpu {
    params: LevelParams,
    history: [Seen; HISTORY],
    /// Index of the newest snapshot; `filled` of them are valid.
    head: usize,
    filled: usize,
    delay: u32,
    idle_left: u32,
    plan: Option<Plan>,
    /// The dodge (action, first seen frame index) whose punish was already decided.
    judged_dodge: Option<(u32, u64)>,
    punishing: bool,
    frames_seen: u64,
    prev: Pad,
}

/// Ground attacks the CPU uses, with how often it prefers each when it approaches.
const GROUND_CHOICES: [(Attack, f32); 4] = [(Attack::Ftilt, 0.3), (Attack::Dtilt, 0.25), (Attack::Fsmash, 0.25), (Attack::Jab, 0.2)];

fn pad_stick(x: f32, y: f32) -> Stick {
    Stick::new(((x + 1.0) * 0.5).clamp(0.0, 1.0), ((y + 1.0) * 0.5).clamp(0.0, 1.0))
}

fn is_dodge(a: u32) -> bool {
    matches!(a, act::SPOTDODGE | act::ROLL_FORWARD | act::ROLL_BACKWARD | act::AIRDODGE)
}

impl Cpu {
    pub fn new(level: u8, rng: &mut ChaCha8Rng) -> Cpu {
        let params = LevelParams::for_level(level);
        let mut cpu = Cpu {
            params,
            history: [Seen::default(); HISTORY],
            head: 0,
            filled: 0,
            delay: params.delay.0,
            idle_left: 0,
            plan: None,
            judged_dodge: None,
            punishing: false,
            frames_seen: 0,
            prev: Pad::NEUTRAL,
        };
        cpu.resample_delay(rng);
        cpu
    }

    pub fn params(&self) -> LevelParams {
        self.params
    }

    /// Record the bot as it stands at the end of a frame.
    pub fn observe(&mut self, bot: &Fighter) {
        self.head = (self.head + 1) % HISTORY;
        self.history[self.head] = Seen::of(bot);
        self.filled = (self.filled + 1).min(HISTORY);
        self.frames_seen += 1;
    }

    /// The bot as seen `age` frames ago (1 = end of the last frame); the oldest one
    /// kept when the history is shorter.
    fn seen(&self, age: u32) -> Option<Seen> {
        if self.filled == 0 {
            return None;
        }
        let back = (age.max(1) as usize - 1).min(self.filled - 1);
        Some(self.history[(self.head + HISTORY - back) % HISTORY])
    }

    fn resample_delay(&mut self, rng: &mut ChaCha8Rng) {
        let (lo, hi) = self.params.delay;
        self.delay = rng.random_range(lo..=hi.max(lo));
    }

    /// This frame's pad for the CPU fighter `me` against `bot` (whose stats it knows).
    pub fn decide(&mut self, me: &Fighter, bot_stats: &CharStats, rng: &mut ChaCha8Rng) -> Pad {
        let pad = self.choose(me, bot_stats, rng);
        self.prev = pad;
        pad
    }

    fn choose(&mut self, me: &Fighter, bot_stats: &CharStats, rng: &mut ChaCha8Rng) -> Pad {
        let Some(seen) = self.seen(self.delay) else { return Pad::NEUTRAL };
        if me.is_dead() {
            return Pad::NEUTRAL;
        }
        if me.on_halo() {
            // Step off the platform after a moment.
            return if me.action() == act::ON_HALO_WAIT && me.action_frame() > 20 { Pad::NEUTRAL.with_main(0.5, 0.0) } else { Pad::NEUTRAL };
        }
        if me.airborne() {
            return self.air(me, seen, bot_stats);
        }
        if !matches!(me.action(), act::WAIT | act::WALK_SLOW | act::WALK_MIDDLE | act::WALK_FAST | act::TURNING | act::DASHING | act::RUNNING | act::CROUCHING)
        {
            return Pad::NEUTRAL;
        }
        if rng.random::<f32>() < self.params.idle_chance / 60.0 {
            self.idle_left = rng.random_range(60..240);
        }
        if self.idle_left > 0 {
            self.idle_left -= 1;
            return Pad::NEUTRAL;
        }
        if act::is_dead(seen.action) || matches!(seen.action, act::ON_HALO_DESCENT | act::ON_HALO_WAIT) {
            return self.walk_toward(me, 0.0);
        }
        self.judge_dodge(seen, rng);
        let dx = seen.x - me.x();
        let toward = if dx < 0.0 { -1.0 } else { 1.0 };

        // The bot in the air above: anti-air.
        if seen.airborne && seen.y > 6.0 && dx.abs() < 18.0 && me.facing() == toward && self.reaches(me, Attack::Utilt, seen, bot_stats, 0.0) {
            return self.attack(Attack::Utilt, me, rng);
        }
        let plan = match self.plan {
            Some(p) => p,
            None => {
                let p = self.new_plan(rng);
                self.plan = Some(p);
                p
            }
        };
        if me.facing() != toward && dx.abs() > 2.0 {
            // Turn around (a tilt, not a flick, so it does not dash away).
            return Pad { main: pad_stick(toward * 0.5, 0.0), ..Pad::NEUTRAL };
        }
        match plan {
            Plan::Aerial => {
                if dx.abs() < 45.0 && dx.abs() > 18.0 && me.action() != act::TURNING {
                    self.resample_delay(rng);
                    return Pad { main: pad_stick(toward, 0.0), ..Pad::NEUTRAL.with(Button::X) };
                }
                if dx.abs() <= 18.0 {
                    self.plan = Some(Plan::Attack { attack: Attack::Jab, bait: false });
                }
                self.approach(me, seen, toward, 45.0)
            }
            Plan::Attack { attack, bait } => {
                let margin = 1.5;
                let in_range = self.reaches(me, attack, seen, bot_stats, margin);
                let baited = bait && !in_range && self.reaches(me, attack, seen, bot_stats, -8.0);
                let any = GROUND_CHOICES.iter().map(|c| c.0).find(|a| self.reaches(me, *a, seen, bot_stats, margin));
                let hold_for_punish = self.punishing && self.dodge_left(seen) > self.startup(me, attack);
                if (in_range || baited) && !hold_for_punish {
                    if rng.random::<f32>() < self.params.attack_chance {
                        let a = if rng.random::<f32>() < self.params.accuracy { attack } else { GROUND_CHOICES[rng.random_range(0..GROUND_CHOICES.len())].0 };
                        return self.attack(a, me, rng);
                    }
                    return Pad::NEUTRAL;
                }
                if hold_for_punish || (any.is_some() && !in_range) {
                    // Close enough for something: hold position (spacing), or creep in.
                    return if in_range || hold_for_punish { Pad::NEUTRAL } else { self.creep(me, toward) };
                }
                self.approach(me, seen, toward, 0.0)
            }
        }
    }

    /// Decide once per dodge seen whether to wait it out.
    fn judge_dodge(&mut self, seen: Seen, rng: &mut ChaCha8Rng) {
        if !is_dodge(seen.action) {
            self.punishing = false;
            return;
        }
        let start = self.frames_seen.saturating_sub(seen.frame as u64 + self.delay as u64);
        let key = (seen.action, start);
        let close = |(a, s): (u32, u64)| a == key.0 && s.abs_diff(key.1) <= 3;
        if !self.judged_dodge.is_some_and(close) {
            self.judged_dodge = Some(key);
            self.punishing = rng.random::<f32>() < self.params.punish_chance;
        }
    }

    /// Frames until the seen dodge's intangibility ends, as the CPU estimates it now.
    fn dodge_left(&self, seen: Seen) -> u32 {
        let end: u32 = match seen.action {
            act::SPOTDODGE => 15,
            act::ROLL_FORWARD | act::ROLL_BACKWARD => 19,
            act::AIRDODGE => 29,
            _ => 0,
        };
        end.saturating_sub(seen.frame + self.delay)
    }

    fn startup(&self, me: &Fighter, a: Attack) -> u32 {
        me.stats().moves.get(a).map_or(0, |d| d.active_window().0)
    }

    fn new_plan(&mut self, rng: &mut ChaCha8Rng) -> Plan {
        if rng.random::<f32>() < self.params.aerial_chance {
            return Plan::Aerial;
        }
        let mut r = rng.random::<f32>() * GROUND_CHOICES.iter().map(|c| c.1).sum::<f32>();
        let mut attack = GROUND_CHOICES[0].0;
        for (a, w) in GROUND_CHOICES {
            if r < w {
                attack = a;
                break;
            }
            r -= w;
        }
        let bait = matches!(attack, Attack::Ftilt | Attack::Fsmash | Attack::Dtilt) && rng.random::<f32>() < self.params.bait_chance;
        Plan::Attack { attack, bait }
    }

    /// Whether `a`, started now facing the bot, would touch the bot where it was seen.
    fn reaches(&self, me: &Fighter, a: Attack, seen: Seen, bot: &CharStats, margin: f32) -> bool {
        let Some(d) = me.stats().moves.get(a) else { return false };
        let facing = if seen.x < me.x() { -1.0 } else { 1.0 };
        let target = Hurtbox { x: seen.x, y: seen.y, height: bot.height, radius: bot.radius };
        d.hitboxes.iter().any(|h| hitbox_touches(h, me.x(), me.y(), facing, &target, margin))
    }

    fn attack(&mut self, a: Attack, me: &Fighter, rng: &mut ChaCha8Rng) -> Pad {
        self.plan = None;
        self.resample_delay(rng);
        let f = me.facing();
        let n = Pad::NEUTRAL;
        match a {
            Attack::Jab => n.with(Button::A),
            Attack::Ftilt => Pad { main: pad_stick(f * 0.5, 0.0), ..n.with(Button::A) },
            Attack::Dtilt => Pad { main: pad_stick(0.0, -0.5), ..n.with(Button::A) },
            Attack::Utilt => Pad { main: pad_stick(0.0, 0.5), ..n.with(Button::A) },
            Attack::Fsmash => Pad { c: pad_stick(f, 0.0), ..n },
            _ => n.with(Button::A),
        }
    }

    /// Walk or dash toward the bot; never run off the stage.
    fn approach(&mut self, me: &Fighter, seen: Seen, toward: f32, extra: f32) -> Pad {
        let dist = (seen.x - me.x()).abs();
        let room = STAGE_EDGE - me.x() * toward;
        let running = matches!(me.action(), act::DASHING | act::RUNNING);
        if dist > 40.0 + extra && room > 35.0 {
            // Flick from neutral to dash; keep holding to run.
            let flick = running || self.prev.main.x == 0.5;
            return if flick { Pad { main: pad_stick(toward, 0.0), ..Pad::NEUTRAL } } else { Pad::NEUTRAL };
        }
        if running {
            return Pad::NEUTRAL;
        }
        self.creep(me, toward)
    }

    fn creep(&self, me: &Fighter, toward: f32) -> Pad {
        if (me.x() * toward) > STAGE_EDGE - 6.0 || matches!(me.action(), act::DASHING | act::RUNNING) {
            return Pad::NEUTRAL;
        }
        Pad { main: pad_stick(toward * 0.6, 0.0), ..Pad::NEUTRAL }
    }

    fn walk_toward(&self, me: &Fighter, x: f32) -> Pad {
        let dx = x - me.x();
        if dx.abs() < 10.0 {
            Pad::NEUTRAL
        } else {
            Pad { main: pad_stick(dx.signum() * 0.6, 0.0), ..Pad::NEUTRAL }
        }
    }

    /// In the air: get back to the stage first, then drift toward the bot and use the
    /// planned aerial when it would reach.
    fn air(&mut self, me: &Fighter, seen: Seen, bot: &CharStats) -> Pad {
        let home = if me.x() < 0.0 { 1.0 } else { -1.0 };
        let (vx, vy) = me.velocity();
        let jump_edge = !self.prev.pressed(Button::X);
        if me.x().abs() > STAGE_EDGE - 5.0 || me.y() < 0.0 {
            let falling = vy + me.kb_velocity().1 <= 0.0;
            let jump = me.jumps_used() < 2 && falling && jump_edge && me.y() < 15.0;
            let pad = Pad { main: pad_stick(home, 0.0), ..Pad::NEUTRAL };
            return if jump { pad.with(Button::X) } else { pad };
        }
        // Any other state would ignore the inputs planned below.
        if !me.air_actionable() {
            return Pad::NEUTRAL;
        }
        let dx = seen.x - me.x();
        let toward = if dx < 0.0 { -1.0 } else { 1.0 };
        let facing_bot = me.facing() == toward;
        if facing_bot && self.reaches(me, Attack::Fair, seen, bot, 1.0) && !self.prev.pressed(Button::A) {
            self.plan = None;
            return Pad { main: pad_stick(toward, 0.0), ..Pad::NEUTRAL.with(Button::A) };
        }
        if self.reaches(me, Attack::Nair, seen, bot, 1.0) && !self.prev.pressed(Button::A) {
            self.plan = None;
            return Pad::NEUTRAL.with(Button::A);
        }
        // Drift toward the bot, but not past the edge.
        let target = seen.x.clamp(-STAGE_EDGE + 10.0, STAGE_EDGE - 10.0);
        let d = target - me.x();
        if d.abs() < 4.0 || (vx * d > 0.0 && vx.abs() > 0.5 && d.abs() < 10.0) {
            Pad::NEUTRAL
        } else {
            Pad { main: pad_stick(d.signum(), 0.0), ..Pad::NEUTRAL }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_scale() {
        let (l1, l9) = (LevelParams::for_level(1), LevelParams::for_level(9));
        assert_eq!(l9.delay, (4, 8));
        assert!(l1.delay.0 > 15);
        assert!(l9.attack_chance > 0.99 && l1.attack_chance < 0.01);
        assert!(l1.idle_chance > 0.0 && l9.idle_chance == 0.0);
        assert_eq!(LevelParams::for_level(0), l1);
        assert_eq!(LevelParams::for_level(200), l9);
        const { assert!(crate::sim::input::TILT < 0.5, "the CPU's walk and tilt inputs rely on this") };
    }
}
