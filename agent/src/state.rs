//! The 27-float state of the "Untouchable" agent (docs/melee-reference.md, section 1), read from a
//! RAM view by one function whichever backend produced the RAM.
//!
//! 13 floats per player, the CPU opponent's port first, then the agent's, then the
//! "previous macro-action was shine" flag. The reader keeps what RAM does not hold:
//! frames in the current action (the game's own counter wraps) and the shine flag.

use shine_bridge::melee::action;
use shine_bridge::ram::{FighterView, PlayerView, RamError, RamView};
use shine_bridge::MatchSetup;

pub const STATE_DIM: usize = 27;
pub const PLAYER_FLOATS: usize = 13;
/// Index of the shine flag.
pub const SHINE_FLAG: usize = 26;

/// Per-player indices inside a 13-float block (add `13 * p`).
pub mod idx {
    pub const X: usize = 0;
    pub const Y: usize = 1;
    pub const SPEED_X: usize = 2;
    pub const SPEED_Y: usize = 3;
    pub const ACTION: usize = 4;
    pub const FACING: usize = 5;
    pub const CHARGING: usize = 6;
    pub const IN_AIR: usize = 7;
    pub const SHIELD: usize = 8;
    pub const JUMPS: usize = 9;
    pub const HITLAG: usize = 10;
    pub const PERCENT: usize = 11;
    pub const ACTION_FRAMES: usize = 12;
}

/// Raw facts about one player that rewards and heuristics need un-normalised.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlayerFacts {
    pub x: f32,
    pub y: f32,
    pub percent: u16,
    pub stocks: u8,
    /// `None` outside a match (no valid fighter pointer).
    pub action: Option<u32>,
    pub facing: f32,
    pub in_air: bool,
    /// Frames in the current action, as counted by the reader.
    pub action_frames: u32,
}

/// One reading: the normalised state plus the raw facts it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub state: [f32; STATE_DIM],
    pub frame: u32,
    pub opponent: PlayerFacts,
    pub agent: PlayerFacts,
}

/// Reads [`Observation`]s frame after frame for one match.
#[derive(Debug, Clone, Default)]
pub struct StateReader {
    last_action: [Option<u32>; 2],
    frames_in_action: [u32; 2],
    shine_flag: bool,
}

impl StateReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget counters (a new episode).
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Set by the agent: whether the macro-action just taken was "shine".
    pub fn set_shine_flag(&mut self, shine: bool) {
        self.shine_flag = shine;
    }

    /// Read the state after one more frame. Call exactly once per emulated frame so
    /// the frames-in-action counters stay true.
    pub fn read(&mut self, ram: RamView<'_>, setup: &MatchSetup) -> Result<Observation, RamError> {
        let mut state = [0.0f32; STATE_DIM];
        let mut facts = [PlayerFacts::default(); 2];
        for (p, port) in [setup.opponent_port, setup.agent_port].into_iter().enumerate() {
            let player = ram.player(port)?;
            let fighter = player.fighter()?;
            let act = fighter.map(|f| f.action_state()).transpose()?;
            if act.is_some() && act == self.last_action[p] {
                self.frames_in_action[p] = self.frames_in_action[p].saturating_add(1);
            } else {
                self.frames_in_action[p] = 0;
            }
            self.last_action[p] = act;
            facts[p] = player_state(&player, fighter.as_ref(), self.frames_in_action[p], &mut state[p * PLAYER_FLOATS..(p + 1) * PLAYER_FLOATS])?;
        }
        state[SHINE_FLAG] = if self.shine_flag { 1.0 } else { 0.0 };
        Ok(Observation { state, frame: ram.frame_counter()?, opponent: facts[0], agent: facts[1] })
    }
}

/// Fill one player's 13 floats (docs/melee-reference.md, section 1). Without a fighter (outside a
/// match) the fighter-derived floats stay 0.
fn player_state(player: &PlayerView<'_>, fighter: Option<&FighterView<'_>>, frames: u32, out: &mut [f32]) -> Result<PlayerFacts, RamError> {
    let (x, y, percent) = (player.x()?, player.y()?, player.percent()?);
    out[idx::X] = (x + 250.0) / 500.0;
    out[idx::Y] = (y + 150.0) / 300.0;
    out[idx::PERCENT] = percent as f32 / 1000.0;
    let mut facts = PlayerFacts { x, y, percent, stocks: player.stocks()?, ..Default::default() };
    if let Some(f) = fighter {
        let act = f.action_state()?;
        let facing = f.facing()?;
        let in_air = f.in_air()? != 0;
        out[idx::SPEED_X] = (f.self_air_vx()? + 20.0) / 40.0;
        out[idx::SPEED_Y] = (f.self_vy()? + 20.0) / 40.0;
        out[idx::ACTION] = act as f32 / action::NORMALISER;
        out[idx::FACING] = facing.clamp(0.0, 1.0);
        out[idx::CHARGING] = if f.charging_smash()? & 0x2 != 0 { 1.0 } else { 0.0 };
        out[idx::IN_AIR] = if in_air { 1.0 } else { 0.0 };
        out[idx::SHIELD] = f.shield_size()? / 60.0;
        out[idx::JUMPS] = f.jumps_used()? as f32 / 2.0;
        out[idx::HITLAG] = f.hitlag_left()? / 60.0;
        out[idx::ACTION_FRAMES] = frames as f32 / 3600.0;
        facts.action = Some(act);
        facts.facing = facing;
        facts.in_air = in_air;
        facts.action_frames = frames;
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shine_bridge::ram::{fighter, static_block, static_player, RamImage, SIM_FIGHTER_DATA};

    /// A hand-made image: port 0 (opponent) in a match, port 1 (agent) has a null
    /// fighter pointer, as before a match starts.
    fn image() -> RamImage {
        let mut img = RamImage::sim();
        let mut w = img.writer();
        let (s0, s1, e0) = (static_block(0), static_block(1), SIM_FIGHTER_DATA[0]);
        w.set_f32(s0 + static_player::X, 50.0).unwrap();
        w.set_f32(s0 + static_player::Y, 30.0).unwrap();
        w.set_u16(s0 + static_player::PERCENT, 120).unwrap();
        w.set_u8(s0 + static_player::STOCKS, 3).unwrap();
        w.set_u32(s0 + static_player::FIGHTER_PTR, e0).unwrap();
        w.set_f32(e0 + fighter::SELF_AIR_VX, 2.0).unwrap();
        w.set_f32(e0 + fighter::SELF_VY, -4.0).unwrap();
        w.set_u32(e0 + fighter::ACTION_STATE, 0x0E).unwrap();
        w.set_f32(e0 + fighter::FACING, -1.0).unwrap();
        w.set_u32(e0 + fighter::CHARGING_SMASH, 0x2).unwrap();
        w.set_u32(e0 + fighter::IN_AIR, 1).unwrap();
        w.set_f32(e0 + fighter::SHIELD_SIZE, 30.0).unwrap();
        w.set_u8(e0 + fighter::JUMPS_USED, 1).unwrap();
        w.set_f32(e0 + fighter::HITLAG_LEFT, 6.0).unwrap();
        w.set_f32(s1 + static_player::X, -100.0).unwrap();
        w.set_u32(s1 + static_player::FIGHTER_PTR, 0).unwrap();
        img
    }

    #[test]
    fn state_matches_hand_computed_floats() {
        let img = image();
        let mut r = StateReader::new();
        r.set_shine_flag(true);
        let o = r.read(img.view(), &MatchSetup::default()).unwrap();
        #[rustfmt::skip]
        let want: [f32; 27] = [
            // opponent (port 0)
            300.0 / 500.0, 180.0 / 300.0, 22.0 / 40.0, 16.0 / 40.0, 14.0 / 382.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.1, 0.12, 0.0,
            // agent (port 1): null fighter pointer, only the static block counts
            150.0 / 500.0, 150.0 / 300.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            1.0,
        ];
        for (i, (g, w)) in o.state.iter().zip(want.iter()).enumerate() {
            assert!((g - w).abs() < 1e-6, "index {i}: got {g}, want {w}");
        }
        assert_eq!(o.agent.action, None);
        assert_eq!(o.opponent.action, Some(0x0E));
        assert_eq!(o.opponent.stocks, 3);
    }

    #[test]
    fn the_marth_side_state_is_the_fox_side_state_with_the_roles_swapped() {
        use crate::side::Side;
        // Both fighters in a match, every float different between them.
        let mut img = image();
        let (s1, e1) = (static_block(1), SIM_FIGHTER_DATA[1]);
        let mut w = img.writer();
        w.set_f32(s1 + static_player::Y, -20.0).unwrap();
        w.set_u16(s1 + static_player::PERCENT, 45).unwrap();
        w.set_u8(s1 + static_player::STOCKS, 2).unwrap();
        w.set_u32(s1 + static_player::FIGHTER_PTR, e1).unwrap();
        w.set_f32(e1 + fighter::SELF_AIR_VX, -3.0).unwrap();
        w.set_f32(e1 + fighter::SELF_VY, 1.5).unwrap();
        w.set_u32(e1 + fighter::ACTION_STATE, 0x2C).unwrap();
        w.set_f32(e1 + fighter::FACING, 1.0).unwrap();
        w.set_f32(e1 + fighter::SHIELD_SIZE, 60.0).unwrap();
        w.set_u8(e1 + fighter::JUMPS_USED, 2).unwrap();
        let game = MatchSetup::default();
        let (mut fox, mut marth) = (StateReader::new(), StateReader::new());
        marth.set_shine_flag(true);
        fox.set_shine_flag(true);
        let f = fox.read(img.view(), &Side::Fox.view(game)).unwrap();
        let m = marth.read(img.view(), &Side::Marth.view(game)).unwrap();
        let mut swapped = f.state;
        swapped[..PLAYER_FLOATS].copy_from_slice(&f.state[PLAYER_FLOATS..2 * PLAYER_FLOATS]);
        swapped[PLAYER_FLOATS..2 * PLAYER_FLOATS].copy_from_slice(&f.state[..PLAYER_FLOATS]);
        assert_eq!(m.state, swapped);
        assert_ne!(m.state, f.state, "the two blocks differ, so the swap is seen");
        assert_eq!((m.agent, m.opponent), (f.opponent, f.agent));
        // Marth is on port 0: its own block is the second one in its view.
        assert_eq!(m.agent.stocks, 3);
        assert_eq!(m.state[PLAYER_FLOATS + idx::X], 300.0 / 500.0);
        assert_eq!(m.state[SHINE_FLAG], 1.0);
    }

    #[test]
    fn frames_in_action_counts_and_resets() {
        let mut img = image();
        let mut r = StateReader::new();
        let setup = MatchSetup::default();
        for _ in 0..4 {
            r.read(img.view(), &setup).unwrap();
        }
        let o = r.read(img.view(), &setup).unwrap();
        assert_eq!(o.opponent.action_frames, 4);
        assert!((o.state[idx::ACTION_FRAMES] - 4.0 / 3600.0).abs() < 1e-9);
        img.writer().set_u32(SIM_FIGHTER_DATA[0] + fighter::ACTION_STATE, 0x14).unwrap();
        assert_eq!(r.read(img.view(), &setup).unwrap().opponent.action_frames, 0);
    }
}
