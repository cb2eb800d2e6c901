//! The embedded Melee-like simulator: a 1v1 on Final Destination at 60 frames/s, a
//! Fox-like bot against a Marth-like scripted CPU (levels 1-9), writing Melee's RAM
//! layout (big-endian, real addresses) every frame so the worker reads it with the same
//! code that reads Dolphin.
//!
//! - [`fighter`]: per-character stats and the action-state machine (Melee's ids).
//! - [`attacks`]: hitboxes and frame data.
//! - [`physics`]: the stage, blast zones, knockback, hitlag and hitstun arithmetic.
//! - [`cpu`]: the scripted opponent; it drives its fighter through a [`Pad`] too.
//! - [`input`]: what a fighter makes of a pad (presses, flicks), NaN-proof.
//!
//! A frame: the CPU picks its pad from what it saw some frames ago; both fighters
//! advance with their pads; hitboxes are resolved against the positions of this frame
//! (both directions at once, so trades happen); the CPU records the bot; the RAM window
//! is written (only the fields, never the whole image).
//!
//! Calibration: the paper's task (no hit for one minute, the five Untouchable
//! macro-actions) against the level-9 CPU from the match start, 200 episodes (seeds
//! 0..200) each; the `calibration` tests assert the bounds (idle <= 5 %, random <= 20 %,
//! reactive >= random + 10 points, oracle >= 60 %):
//!
//! | bot | survives the full minute |
//! |---|---|
//! | idle (always "nothing"; hit after 45 frames on average) | 0.0 % |
//! | uniformly random macro-actions | 0.0 % |
//! | reactive, RAM only: spot dodge when the CPU is in an attack within 40 units (the agent crate's `Dodge`) | 13.5 % |
//! | oracle: knows reach and frame data, dodges only moves that would land, timed to cover them | 97.5 % |
//!
//! The level-9 CPU starts about 57 attacks a minute. Lower levels are gentler (an idle
//! bot lasts about 20 s on average at level 1, under a second at level 9).
//! Throughput is measured with the state read included, as a worker runs it:
//! `cargo run --release -p shine-agent --example sim_bench` (figures in
//! docs/benchmarks.md).
//!
//! Matches start with both fighters standing in Wait (Melee's entry animation is
//! skipped so that an episode's first frame is already playable).
//!
//! Those numbers rest on the frame data in [`attacks`]: every CPU move starts on
//! frame >= 4 and stays out <= 8 frames, so a spot dodge (intangible on its frames
//! 2-15) started on seeing the move covers it; and it recovers late enough that the
//! dodger can dodge again before the next move lands. What beats simple reflexes is the
//! CPU's spacing: it whiffs just outside the bot's hurtbox as bait and, when it sees a
//! dodge, often waits it out and hits its end.

pub mod attacks;
pub mod cpu;
pub mod fighter;
pub mod input;
pub mod physics;

#[cfg(test)]
mod calibration;
#[cfg(test)]
mod tests;

use crate::emulator::{Emulator, MatchSetup};
use crate::pad::Pad;
use crate::ram::{self, addr, fighter as fo, pad_block, static_player, RamError, RamImage, RamView};
use attacks::{hitbox_touches, Hitbox};
use cpu::Cpu;
use fighter::{Fighter, FOX_STATS, MARTH_STATS};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// Index of the bot's fighter in [`Sim::fighter`].
pub const AGENT: usize = 0;
/// Index of the CPU's fighter.
pub const OPPONENT: usize = 1;

/// Where the fighters start: facing each other.
pub const SPAWN_X: [f32; 2] = [-40.0, 40.0];

#[derive(Debug, Error)]
pub enum SimError {
    #[error("invalid match setup: {0}")]
    BadSetup(&'static str),
    #[error("writing the simulator's RAM: {0}")]
    Ram(#[from] RamError),
}

fn check(setup: &MatchSetup) -> Result<(), SimError> {
    if setup.agent_port > 3 || setup.opponent_port > 3 {
        return Err(SimError::BadSetup("ports are 0..=3"));
    }
    if setup.agent_port == setup.opponent_port {
        return Err(SimError::BadSetup("the agent and the opponent need different ports"));
    }
    if !(1..=9).contains(&setup.cpu_level) {
        return Err(SimError::BadSetup("cpu_level is 1..=9"));
    }
    if setup.stocks == 0 {
        return Err(SimError::BadSetup("stocks must be at least 1"));
    }
    Ok(())
}

pub struct Sim {
    setup: MatchSetup,
    rng: ChaCha8Rng,
    frame: u32,
    fighters: [Fighter; 2],
    /// Port and fighter-data address of each fighter.
    ports: [usize; 2],
    blocks: [u32; 2],
    cpu: Cpu,
    cpu_pad: Pad,
    /// With [`Sim::with_agent_cpu`]: a second scripted CPU that plays the bot's side
    /// (the pads given to `step` are then ignored), with its own random stream so the
    /// opponent plays from the same seed as it would against any other bot.
    agent_cpu: Option<AgentCpu>,
    ram: RamImage,
}

/// The scripted CPU on the bot's side ([`Sim::with_agent_cpu`]).
struct AgentCpu {
    level: u8,
    cpu: Cpu,
    rng: ChaCha8Rng,
}

impl AgentCpu {
    fn new(level: u8, seed: u64) -> AgentCpu {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ AGENT_CPU_STREAM);
        AgentCpu { level, cpu: Cpu::new(level, &mut rng), rng }
    }
}

/// Seed offset of the agent-side CPU's random stream.
const AGENT_CPU_STREAM: u64 = 0xB07_C9B0;

impl Sim {
    /// A match as `setup` says. An invalid setup (see [`Sim::try_new`]) is repaired
    /// rather than refused: level and stocks are clamped, bad ports become the default
    /// ports.
    pub fn new(setup: MatchSetup, seed: u64) -> Sim {
        let mut s = setup;
        s.cpu_level = s.cpu_level.clamp(1, 9);
        s.stocks = s.stocks.max(1);
        if check(&s).is_err() {
            let d = MatchSetup::default();
            (s.agent_port, s.opponent_port) = (d.agent_port, d.opponent_port);
        }
        match Sim::try_new(s, seed) {
            Ok(sim) => sim,
            // Unreachable: `s` passes `check` and every RAM address is inside the window
            // (`tests::every_field_is_inside_the_window`). Still, no panic: start blank.
            Err(_) => Sim::build(MatchSetup::default(), seed, RamImage::sim()),
        }
    }

    /// A match, or why `setup` is not one.
    pub fn try_new(setup: MatchSetup, seed: u64) -> Result<Sim, SimError> {
        check(&setup)?;
        let mut sim = Sim::build(setup, seed, RamImage::sim());
        sim.write_ram()?;
        Ok(sim)
    }

    fn build(setup: MatchSetup, seed: u64, ram: RamImage) -> Sim {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let cpu = Cpu::new(setup.cpu_level, &mut rng);
        let ports = [setup.agent_port.min(3), setup.opponent_port.min(3)];
        // The lower port gets the first fighter block, so the default ports (agent 1,
        // CPU 0) use `SIM_FIGHTER_DATA[port]`.
        let first = usize::from(ports[AGENT] > ports[OPPONENT]);
        let blocks = [ram::SIM_FIGHTER_DATA[first], ram::SIM_FIGHTER_DATA[1 - first]];
        // The lower port spawns on the left, as Melee places port 1 left of port 2.
        let xs = if ports[AGENT] < ports[OPPONENT] { SPAWN_X } else { [SPAWN_X[1], SPAWN_X[0]] };
        Sim {
            setup,
            rng,
            frame: 0,
            fighters: [Fighter::new(&FOX_STATS, xs[0], setup.stocks), Fighter::new(&MARTH_STATS, xs[1], setup.stocks)],
            ports,
            blocks,
            cpu,
            cpu_pad: Pad::NEUTRAL,
            agent_cpu: None,
            ram,
        }
    }

    /// The scripted CPU at `level` (clamped to 1..=9) plays the bot's side, in this
    /// match (`seed`: the one it was made with) and after every reset: a baseline for
    /// bots, what the game's own CPU does in the bot's place.
    pub fn with_agent_cpu(mut self, level: u8, seed: u64) -> Sim {
        self.set_agent_cpu(Some(level), seed);
        self
    }

    /// [`Sim::with_agent_cpu`] on a simulator in place (`None`: the pads given to
    /// `step` play the bot's side again), for a backend that changes who plays Fox
    /// from one match to the next without a new RAM image.
    pub fn set_agent_cpu(&mut self, level: Option<u8>, seed: u64) {
        self.agent_cpu = level.map(|l| AgentCpu::new(l.clamp(1, 9), seed));
    }

    /// The fighter with index [`AGENT`] or [`OPPONENT`] (anything else: the opponent).
    pub fn fighter(&self, who: usize) -> &Fighter {
        &self.fighters[who.min(1)]
    }
    pub fn agent(&self) -> &Fighter {
        &self.fighters[AGENT]
    }
    pub fn opponent(&self) -> &Fighter {
        &self.fighters[OPPONENT]
    }
    /// Frames since the match started.
    pub fn frame(&self) -> u32 {
        self.frame
    }
    /// The pad the CPU held on the last frame.
    pub fn cpu_pad(&self) -> Pad {
        self.cpu_pad
    }

    #[cfg(test)]
    pub(crate) fn fighter_mut(&mut self, who: usize) -> &mut Fighter {
        &mut self.fighters[who.min(1)]
    }

    /// Advance one frame with the opponent driven by `opponent` instead of the CPU
    /// script (tests, self-play).
    pub fn step_both(&mut self, agent: &Pad, opponent: &Pad) -> Result<(), SimError> {
        self.cpu_pad = *opponent;
        self.advance(agent)
    }

    fn advance(&mut self, agent: &Pad) -> Result<(), SimError> {
        let opp = self.cpu_pad;
        let agent = match &mut self.agent_cpu {
            Some(a) => a.cpu.decide(&self.fighters[AGENT], self.fighters[OPPONENT].stats, &mut a.rng),
            None => *agent,
        };
        self.fighters[AGENT].update(&agent);
        self.fighters[OPPONENT].update(&opp);
        self.resolve_hits();
        self.cpu.observe(&self.fighters[AGENT]);
        if let Some(a) = &mut self.agent_cpu {
            a.cpu.observe(&self.fighters[OPPONENT]);
        }
        self.frame = self.frame.wrapping_add(1);
        Ok(self.write_ram()?)
    }

    fn resolve_hits(&mut self) {
        let [a, b] = &self.fighters;
        let hits = [detect(a, b), detect(b, a)];
        for (attacker, hit) in hits.into_iter().enumerate() {
            if let Some((hb, mult)) = hit {
                let [a, b] = &mut self.fighters;
                let (att, def) = if attacker == AGENT { (a, b) } else { (b, a) };
                apply_hit(att, def, &hb, mult);
            }
        }
    }

    /// Write this frame's state into the RAM window.
    fn write_ram(&mut self) -> Result<(), RamError> {
        let mut w = self.ram.writer();
        w.set_u32(addr::FRAME_COUNTER, self.frame)?;
        w.set_u8(addr::MENU, 2)?;
        for (i, f) in self.fighters.iter().enumerate() {
            let port = self.ports[i];
            let s = ram::static_block(port);
            let e = self.blocks[i];
            w.set_u32(s + static_player::CHARACTER, u32::from(f.stats.character.external))?;
            w.set_f32(s + static_player::X, f.x)?;
            w.set_f32(s + static_player::Y, f.y)?;
            w.set_u16(s + static_player::PERCENT, f.percent.clamp(0.0, 999.0) as u16)?;
            w.set_u8(s + static_player::STOCKS, f.stocks)?;
            w.set_u32(s + static_player::FIGHTER_PTR, e)?;

            w.set_u32(e + fo::INTERNAL_CHARACTER, u32::from(f.stats.character.internal))?;
            w.set_u32(e + fo::ACTION_STATE, f.action)?;
            w.set_f32(e + fo::FACING, f.facing)?;
            w.set_f32(e + fo::SELF_AIR_VX, f.vx)?;
            w.set_f32(e + fo::SELF_VY, f.vy)?;
            w.set_f32(e + fo::ATTACK_VX, f.kb_vx)?;
            w.set_f32(e + fo::ATTACK_VY, f.kb_vy)?;
            w.set_f32(e + fo::X, f.x)?;
            w.set_f32(e + fo::Y, f.y)?;
            w.set_u32(e + fo::IN_AIR, u32::from(f.airborne))?;
            w.set_f32(e + fo::SELF_GROUND_VX, if f.airborne { 0.0 } else { f.vx })?;
            w.set_f32(e + fo::ACTION_FRAME, f.frame as f32)?;
            w.set_f32(e + fo::PERCENT, f.percent)?;
            w.set_f32(e + fo::HITLAG_LEFT, f.hitlag as f32)?;
            w.set_u8(e + fo::JUMPS_USED, f.jumps_used)?;
            w.set_u32(e + fo::INVULNERABLE, u32::from(f.is_intangible()))?;
            w.set_f32(e + fo::SHIELD_SIZE, f.shield.max(0.0))?;
            w.set_u32(e + fo::CHARGING_SMASH, if f.charging { 0x2 } else { 0 })?;
            w.set_f32(e + fo::HITSTUN_LEFT, f.hitstun as f32)?;

            let p = ram::pad_block_addr(port);
            let (mx, my) = f.pad.main.to_melee();
            let (cx, cy) = f.pad.c.to_melee();
            w.set_u32(p + pad_block::BUTTONS, f.pad.melee_buttons())?;
            w.set_f32(p + pad_block::MAIN_X, mx)?;
            w.set_f32(p + pad_block::MAIN_Y, my)?;
            w.set_f32(p + pad_block::C_X, cx)?;
            w.set_f32(p + pad_block::C_Y, cy)?;
            w.set_f32(p + pad_block::L_ANALOG, f.pad.l)?;
            w.set_f32(p + pad_block::R_ANALOG, f.pad.r)?;
        }
        Ok(())
    }
}

/// The first hitbox of `att` touching `def` this frame, with the charge multiplier.
fn detect(att: &Fighter, def: &Fighter) -> Option<(Hitbox, f32)> {
    if def.is_intangible() || def.is_dead() {
        return None;
    }
    let target = def.hurtbox();
    att.active_hitboxes().find(|h| hitbox_touches(h, att.x, att.y, att.facing, &target, 0.0)).map(|h| (*h, att.charge_multiplier()))
}

fn apply_hit(att: &mut Fighter, def: &mut Fighter, hb: &Hitbox, mult: f32) {
    let damage = hb.damage * mult;
    let lag = physics::hitlag(damage);
    att.attack_connected = true;
    att.hitlag = lag;
    let dir = if hb.dx > 0.0 {
        att.facing
    } else if hb.dx < 0.0 {
        -att.facing
    } else if def.x < att.x {
        -1.0
    } else {
        1.0
    };
    if def.is_shielding() {
        def.shield_hit(damage, dir, lag);
        return;
    }
    let s = def.stats;
    let kb = physics::knockback(def.percent + damage, damage, s.weight, hb.kbg, hb.bkb, hb.wbkb);
    let angle = physics::launch_angle(hb.angle, kb, !def.airborne);
    def.take_hit(damage, kb, angle, dir, lag);
}

impl Emulator for Sim {
    type Error = SimError;

    fn reset(&mut self, setup: MatchSetup, seed: u64) -> Result<(), SimError> {
        check(&setup)?;
        let ports_changed = (setup.agent_port, setup.opponent_port) != (self.setup.agent_port, self.setup.opponent_port);
        // Reuse the image (no 560 KiB allocation per episode); only a port change
        // would leave stale blocks behind.
        let ram = if ports_changed { RamImage::sim() } else { std::mem::replace(&mut self.ram, RamImage::new(0..0)) };
        let agent_cpu = self.agent_cpu.as_ref().map(|a| AgentCpu::new(a.level, seed));
        *self = Sim::build(setup, seed, ram);
        self.agent_cpu = agent_cpu;
        self.write_ram()?;
        Ok(())
    }

    fn step(&mut self, pad: &Pad) -> Result<(), SimError> {
        let [agent, opp] = &self.fighters;
        self.cpu_pad = self.cpu.decide(opp, agent.stats, &mut self.rng);
        self.advance(pad)
    }

    fn ram(&self) -> RamView<'_> {
        self.ram.view()
    }

    fn setup(&self) -> MatchSetup {
        self.setup
    }
}
