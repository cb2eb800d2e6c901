//! Calibration against the paper's task: avoid every hit for one minute (3600 frames)
//! against the level-9 CPU, acting with the paper's five macro-actions. Idle and random
//! bots must fail, a simple reactive bot must do clearly better than random, and a
//! clever reactive "oracle" must survive most minutes (the learned bot needs 75 %).
//!
//! The macro scripts are the agent crate's (`agent/src/actions.rs`, Untouchable set),
//! rebuilt here because the bridge cannot depend on the agent.

use super::attacks::hitbox_touches;
use super::{Sim, AGENT, OPPONENT};
use crate::emulator::{Emulator, MatchSetup};
use crate::melee::action;
use crate::pad::{Button, Pad, Stick};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub const EPISODE_FRAMES: u32 = 3600;

pub const NOTHING: usize = 0;
pub const SHINE: usize = 1;
pub const SPOT_DODGE: usize = 2;
pub const ROLL_LEFT: usize = 3;
pub const ROLL_RIGHT: usize = 4;

/// The five Untouchable macro-actions, one pad per frame.
pub fn macros() -> [Vec<Pad>; 5] {
    let n = Pad::NEUTRAL;
    let down = Stick::new(0.5, 0.0);
    let shield_down = Pad { main: down, ..n.with(Button::L).with_l(1.0) };
    let roll = |x: f32| Pad { main: Stick::new(x, 89.0 / 255.0), ..n.with(Button::L).with_l(1.0) };
    let rep = |p: Pad, k: usize| std::iter::repeat_n(p, k);
    [
        vec![n],
        rep(Pad { main: down, ..n.with(Button::B) }, 1).chain(rep(Pad { main: down, ..n }, 2)).chain(rep(n.with(Button::X), 1)).chain(rep(n, 4)).collect(),
        rep(shield_down, 10).chain(rep(n, 12)).collect(),
        rep(roll(0.0), 10).chain(rep(n, 20)).collect(),
        rep(roll(1.0), 10).chain(rep(n, 20)).collect(),
    ]
}

/// A bot choosing macro-actions.
pub trait Bot {
    fn act(&mut self, sim: &Sim) -> usize;
}

pub struct Idle;
impl Bot for Idle {
    fn act(&mut self, _: &Sim) -> usize {
        NOTHING
    }
}

pub struct Random(pub ChaCha8Rng);
impl Bot for Random {
    fn act(&mut self, _: &Sim) -> usize {
        self.0.random_range(0..5)
    }
}

/// The agent crate's `Dodge` heuristic, reading only RAM: spot dodge when the opponent
/// is in an attack state within 40 units.
pub struct Reactive;
impl Bot for Reactive {
    fn act(&mut self, sim: &Sim) -> usize {
        let ram = sim.ram();
        let setup = sim.setup();
        let read = |port| -> Option<(f32, f32, u32)> {
            let p = ram.player(port).ok()?;
            let f = p.fighter().ok()??;
            Some((p.x().ok()?, p.y().ok()?, f.action_state().ok()?))
        };
        match (read(setup.agent_port), read(setup.opponent_port)) {
            (Some((mx, my, _)), Some((ox, oy, a))) => {
                let close = (mx - ox).abs() < 40.0 && (my - oy).abs() < 30.0;
                if close && (action::NEUTRAL_ATTACK_1..=action::DAIR).contains(&a) {
                    SPOT_DODGE
                } else {
                    NOTHING
                }
            }
            _ => NOTHING,
        }
    }
}

/// A clever reactive bot: knows the frame data and reach of the CPU's moves, dodges
/// only moves that would land, times the dodge so its intangibility covers every
/// remaining active frame, and otherwise stands still.
pub struct Oracle;

impl Bot for Oracle {
    fn act(&mut self, sim: &Sim) -> usize {
        let (me, opp) = (sim.fighter(AGENT), sim.fighter(OPPONENT));
        if me.action() != action::WAIT {
            return NOTHING;
        }
        let Some(data) = opp.attack_data().filter(|_| opp.attack().is_some_and(|a| a.action() == opp.action())) else {
            return NOTHING;
        };
        let f = opp.action_frame();
        let s = me.stats();
        // Hitboxes still to come that would touch me, with the attacker carried along
        // by its current speed (dash attacks, aerials) plus a little slack.
        let (vx, vy) = opp.velocity();
        let (kx, ky) = opp.kb_velocity();
        let threat = |h: &&super::attacks::Hitbox| {
            (h.first.max(f + 1)..=h.last).any(|k| {
                let t = (k - f) as f32;
                let (ax, ay) = (opp.x() + (vx + kx) * t, (opp.y() + (vy + ky) * t).max(0.0));
                hitbox_touches(h, ax, ay, opp.facing(), &me.hurtbox(), -2.0)
            })
        };
        let threats = || data.hitboxes.iter().filter(move |h| h.last > f).filter(threat);
        let (Some(first), Some(last)) = (threats().map(|h| h.first.max(f + 1)).min(), threats().map(|h| h.last).max()) else {
            return NOTHING;
        };
        // A dodge chosen now starts on the attack's frame f + 1 and is intangible on
        // attack frames f + 2 ..= f + 15.
        let (i0, i1) = (f + s.spotdodge.intangible.0, f + s.spotdodge.intangible.1);
        if first >= i0 && last <= i1 {
            return SPOT_DODGE;
        }
        if last > i1 && first > i0 {
            // Too early to cover the end: wait.
            return NOTHING;
        }
        // Too late for a spot dodge: the shine is intangible at once.
        if last <= f + 3 {
            return SHINE;
        }
        if opp.x() > me.x() {
            ROLL_LEFT
        } else {
            ROLL_RIGHT
        }
    }
}

/// Result of one episode: frames survived (3600 = the full minute).
pub fn episode(bot: &mut dyn Bot, level: u8, seed: u64) -> u32 {
    let setup = MatchSetup { cpu_level: level, ..MatchSetup::default() };
    let mut sim = Sim::new(setup, seed);
    let scripts = macros();
    let start_stocks = sim.agent().stocks();
    let mut frames = 0;
    loop {
        let a = bot.act(&sim);
        for pad in &scripts[a] {
            if sim.step(pad).is_err() {
                return frames;
            }
            frames += 1;
            let ram = sim.ram();
            let me = match ram.player(setup.agent_port) {
                Ok(p) => p,
                Err(_) => return frames,
            };
            if me.percent().unwrap_or(1) > 0 || me.stocks().unwrap_or(0) < start_stocks {
                return frames;
            }
            if frames >= EPISODE_FRAMES {
                return frames;
            }
        }
    }
}

/// Share of `n` episodes (seeds 0..n) survived for the full minute.
pub fn survival(mut make: impl FnMut(u64) -> Box<dyn Bot>, level: u8, n: u64) -> f64 {
    let won = (0..n).filter(|&seed| episode(make(seed).as_mut(), level, seed) >= EPISODE_FRAMES).count();
    won as f64 / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u64 = 200;

    #[test]
    fn level_9_calibration() {
        let idle = survival(|_| Box::new(Idle), 9, N);
        let random = survival(|s| Box::new(Random(ChaCha8Rng::seed_from_u64(s ^ 0x5eed))), 9, N);
        let reactive = survival(|_| Box::new(Reactive), 9, N);
        let oracle = survival(|_| Box::new(Oracle), 9, N);
        eprintln!("level 9, {N} episodes: idle {idle:.3} random {random:.3} reactive {reactive:.3} oracle {oracle:.3}");
        assert!(idle <= 0.05, "idle survives {idle}");
        assert!(random <= 0.20, "random survives {random}");
        assert!(reactive >= random + 0.10, "reactive {reactive} vs random {random}");
        assert!(oracle >= 0.60, "oracle survives {oracle}");
    }

    #[test]
    fn lower_levels_are_gentler() {
        let mean_idle = |level| (0..50).map(|s| episode(&mut Idle, level, s) as u64).sum::<u64>() / 50;
        let (l1, l5, l9) = (mean_idle(1), mean_idle(5), mean_idle(9));
        assert!(l1 > 5 * l9 && l5 > l9, "idle survives {l1} / {l5} / {l9} frames at levels 1 / 5 / 9");
    }
}
