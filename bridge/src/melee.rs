//! Melee's own identifiers that Shine uses: action states (the numbering of libmelee's
//! `Action` enum and of the decompilation's motion states, NTSC 1.02) and characters
//! ([`characters`]). The simulator writes these ids so the state vector means the same
//! thing for the simulator and for Dolphin.

pub mod characters;
pub use characters::Character;

/// Action-state ids (fighter +0x70).
pub mod action {
    pub const DEAD_DOWN: u32 = 0x00;
    pub const DEAD_LEFT: u32 = 0x01;
    pub const DEAD_RIGHT: u32 = 0x02;
    pub const DEAD_UP: u32 = 0x03;
    /// Last of the dead/dying states (0x00..=0x0A).
    pub const DEAD_LAST: u32 = 0x0A;
    /// Respawn platform descending, then waiting on it.
    pub const ON_HALO_DESCENT: u32 = 0x0C;
    pub const ON_HALO_WAIT: u32 = 0x0D;
    /// Standing idle: the state the paper's reward pays for.
    pub const WAIT: u32 = 0x0E;
    pub const WALK_SLOW: u32 = 0x0F;
    pub const WALK_MIDDLE: u32 = 0x10;
    pub const WALK_FAST: u32 = 0x11;
    pub const TURNING: u32 = 0x12;
    pub const TURNING_RUN: u32 = 0x13;
    pub const DASHING: u32 = 0x14;
    pub const RUNNING: u32 = 0x15;
    pub const RUN_BRAKE: u32 = 0x17;
    /// Jump squat.
    pub const KNEE_BEND: u32 = 0x18;
    pub const JUMPING_FORWARD: u32 = 0x19;
    pub const JUMPING_BACKWARD: u32 = 0x1A;
    pub const JUMPING_ARIAL_FORWARD: u32 = 0x1B;
    pub const JUMPING_ARIAL_BACKWARD: u32 = 0x1C;
    pub const FALLING: u32 = 0x1D;
    pub const FALLING_AERIAL: u32 = 0x20;
    /// Helpless fall after an air dodge (or an up-B).
    pub const DEAD_FALL: u32 = 0x23;
    pub const TUMBLING: u32 = 0x26;
    pub const CROUCH_START: u32 = 0x27;
    pub const CROUCHING: u32 = 0x28;
    pub const CROUCH_END: u32 = 0x29;
    pub const LANDING: u32 = 0x2A;
    pub const LANDING_SPECIAL: u32 = 0x2B;
    pub const NEUTRAL_ATTACK_1: u32 = 0x2C;
    pub const DASH_ATTACK: u32 = 0x32;
    pub const FTILT_MID: u32 = 0x35;
    pub const UPTILT: u32 = 0x38;
    pub const DOWNTILT: u32 = 0x39;
    pub const FSMASH_MID: u32 = 0x3C;
    pub const UPSMASH: u32 = 0x3F;
    pub const DOWNSMASH: u32 = 0x40;
    pub const NAIR: u32 = 0x41;
    pub const FAIR: u32 = 0x42;
    pub const BAIR: u32 = 0x43;
    pub const UAIR: u32 = 0x44;
    pub const DAIR: u32 = 0x45;
    pub const NAIR_LANDING: u32 = 0x46;
    pub const FAIR_LANDING: u32 = 0x47;
    pub const BAIR_LANDING: u32 = 0x48;
    pub const UAIR_LANDING: u32 = 0x49;
    pub const DAIR_LANDING: u32 = 0x4A;
    pub const DAMAGE_HIGH_1: u32 = 0x4B;
    pub const DAMAGE_NEUTRAL_1: u32 = 0x4E;
    pub const DAMAGE_AIR_1: u32 = 0x54;
    pub const DAMAGE_FLY_HIGH: u32 = 0x57;
    pub const DAMAGE_FLY_NEUTRAL: u32 = 0x58;
    pub const DAMAGE_FLY_TOP: u32 = 0x5A;
    /// Missed tech: bounced on the ground face up, then lying.
    pub const TECH_MISS_UP: u32 = 0xB7;
    /// Getting up from lying face up.
    pub const GROUND_GETUP: u32 = 0xBA;
    pub const SHIELD_START: u32 = 0xB2;
    pub const SHIELD: u32 = 0xB3;
    pub const SHIELD_RELEASE: u32 = 0xB4;
    pub const SHIELD_STUN: u32 = 0xB5;
    pub const SHIELD_BREAK_FLY: u32 = 0xCD;
    pub const SHIELD_BREAK_FALL: u32 = 0xCE;
    pub const SHIELD_BREAK_DOWN_U: u32 = 0xCF;
    pub const SHIELD_BREAK_STAND_U: u32 = 0xD1;
    /// Dizzy after a shield break (libmelee `SHIELD_BREAK_TEETER`, Melee's `FuraFura`).
    pub const SHIELD_BREAK_TEETER: u32 = 0xD3;
    pub const ROLL_FORWARD: u32 = 0xE9;
    pub const ROLL_BACKWARD: u32 = 0xEA;
    pub const SPOTDODGE: u32 = 0xEB;
    pub const AIRDODGE: u32 = 0xEC;
    pub const ENTRY: u32 = 0x142;
    pub const ENTRY_START: u32 = 0x143;
    pub const ENTRY_END: u32 = 0x144;
    /// First of the character-specific action states (the decompilation's
    /// `ftCo_MS_Count`, 341); the ids from here on mean different things per character.
    pub const FIRST_SPECIAL: u32 = 0x155;
    /// Fox's reflector ("shine"), the decompilation's `ftFx_MS_SpecialLw*` (libmelee
    /// `DOWN_B_*`): on the ground start, loop (held), hit (reflecting), end, turn; in
    /// the air the same five.
    pub const DOWN_B_GROUND_START: u32 = 0x168;
    pub const DOWN_B_GROUND: u32 = 0x169;
    pub const DOWN_B_STUN: u32 = 0x16A;
    pub const DOWN_B_GROUND_END: u32 = 0x16B;
    pub const DOWN_B_GROUND_TURN: u32 = 0x16C;
    pub const DOWN_B_AIR_START: u32 = 0x16D;
    pub const DOWN_B_AIR: u32 = 0x16E;
    pub const DOWN_B_AIR_STUN: u32 = 0x16F;
    pub const DOWN_B_AIR_END: u32 = 0x170;
    pub const DOWN_B_AIR_TURN: u32 = 0x171;
    /// The state vector divides the action state by this (docs/melee-reference.md, section 1).
    pub const NORMALISER: f32 = 382.0;

    /// True for the dead/dying states.
    pub fn is_dead(a: u32) -> bool {
        a <= DEAD_LAST
    }
}

/// Fox's own action states, 0x155 on, as the decompilation's `ftFox_MotionState`
/// numbers them (`src/melee/ft/chara/ftFox/forward.h`, counted from `ftCo_MS_Count`):
/// the ids a real Fox can be in beyond the common ones. `air`: the state is one of the
/// air versions (`Some(true)`), a ground one (`Some(false)`), or either (`None`).
pub const FOX_SPECIALS: [(u32, &str, Option<bool>); 29] = [
    (0x155, "SpecialNStart", Some(false)),
    (0x156, "SpecialNLoop", Some(false)),
    (0x157, "SpecialNEnd", Some(false)),
    (0x158, "SpecialAirNStart", Some(true)),
    (0x159, "SpecialAirNLoop", Some(true)),
    (0x15A, "SpecialAirNEnd", Some(true)),
    (0x15B, "SpecialSStart", Some(false)),
    (0x15C, "SpecialS", Some(false)),
    (0x15D, "SpecialSEnd", Some(false)),
    (0x15E, "SpecialAirSStart", Some(true)),
    (0x15F, "SpecialAirS", Some(true)),
    (0x160, "SpecialAirSEnd", Some(true)),
    (0x161, "SpecialHiStart", Some(false)),
    (0x162, "SpecialAirHiStart", Some(true)),
    (0x163, "SpecialHi", None),
    (0x164, "SpecialAirHi", Some(true)),
    (0x165, "SpecialHiEnd", Some(false)),
    (0x166, "SpecialAirHiEnd", Some(true)),
    (0x167, "SpecialHiBound", None),
    (0x168, "SpecialLwStart", Some(false)),
    (0x169, "SpecialLwLoop", Some(false)),
    (0x16A, "SpecialLwReflect", Some(false)),
    (0x16B, "SpecialLwEnd", Some(false)),
    (0x16C, "SpecialLwTurn", Some(false)),
    (0x16D, "SpecialAirLwStart", Some(true)),
    (0x16E, "SpecialAirLwLoop", Some(true)),
    (0x16F, "SpecialAirLwReflect", Some(true)),
    (0x170, "SpecialAirLwEnd", Some(true)),
    (0x171, "SpecialAirLwTurn", Some(true)),
];

/// Whether real Melee puts `who` in action state `a` (in the air when `in_air`): every
/// character shares the common states below [`action::FIRST_SPECIAL`]; above it, only
/// Fox's are known here (the simulator gives Marth no special move).
pub fn is_real_action(who: Character, a: u32, in_air: bool) -> bool {
    if a < action::FIRST_SPECIAL {
        return true;
    }
    who == characters::FOX && FOX_SPECIALS.iter().any(|(id, _, air)| *id == a && air.is_none_or(|air| air == in_air))
}

/// A short human name for an action state, for logs and the dashboard.
pub fn action_name(a: u32) -> &'static str {
    use action::*;
    match a {
        0x00..=0x0A => "Dead",
        ON_HALO_DESCENT | ON_HALO_WAIT => "Respawn",
        WAIT => "Wait",
        WALK_SLOW..=WALK_FAST => "Walk",
        TURNING | TURNING_RUN => "Turn",
        DASHING => "Dash",
        RUNNING => "Run",
        RUN_BRAKE => "RunBrake",
        KNEE_BEND => "JumpSquat",
        JUMPING_FORWARD | JUMPING_BACKWARD => "Jump",
        JUMPING_ARIAL_FORWARD | JUMPING_ARIAL_BACKWARD => "DoubleJump",
        FALLING..=0x25 => "Fall",
        TUMBLING => "Tumble",
        CROUCH_START..=CROUCH_END => "Crouch",
        LANDING | LANDING_SPECIAL => "Landing",
        0x2C..=0x31 => "Jab",
        DASH_ATTACK => "DashAttack",
        0x33..=0x37 => "FTilt",
        UPTILT => "UTilt",
        DOWNTILT => "DTilt",
        0x3A..=0x3E => "FSmash",
        UPSMASH => "USmash",
        DOWNSMASH => "DSmash",
        NAIR => "Nair",
        FAIR => "Fair",
        BAIR => "Bair",
        UAIR => "Uair",
        DAIR => "Dair",
        0x46..=0x4A => "AerialLanding",
        0x4B..=0x5B => "Damage",
        SHIELD_START..=0xB6 => "Shield",
        TECH_MISS_UP..=0xC6 => "Downed",
        SHIELD_BREAK_FLY..=SHIELD_BREAK_TEETER => "ShieldBreak",
        ROLL_FORWARD => "RollForward",
        ROLL_BACKWARD => "RollBackward",
        SPOTDODGE => "SpotDodge",
        AIRDODGE => "AirDodge",
        ENTRY..=ENTRY_END => "Entry",
        DOWN_B_GROUND_START..=DOWN_B_AIR_TURN => "Shine",
        _ => "Other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fox_shine_ids_are_the_decompilations() {
        // ftFox_MotionState from ftCo_MS_Count (0x155): nineteen neutral-, side- and
        // up-special states, then the reflector's five on the ground and five in the air.
        for (i, (id, _, _)) in FOX_SPECIALS.iter().enumerate() {
            assert_eq!(*id, action::FIRST_SPECIAL + i as u32);
        }
        let name = |a: u32| FOX_SPECIALS.iter().find(|(id, _, _)| *id == a).map(|(_, n, _)| *n);
        use action::*;
        let ours = [
            (DOWN_B_GROUND_START, "SpecialLwStart"),
            (DOWN_B_GROUND, "SpecialLwLoop"),
            (DOWN_B_STUN, "SpecialLwReflect"),
            (DOWN_B_GROUND_END, "SpecialLwEnd"),
            (DOWN_B_GROUND_TURN, "SpecialLwTurn"),
            (DOWN_B_AIR_START, "SpecialAirLwStart"),
            (DOWN_B_AIR, "SpecialAirLwLoop"),
            (DOWN_B_AIR_STUN, "SpecialAirLwReflect"),
            (DOWN_B_AIR_END, "SpecialAirLwEnd"),
            (DOWN_B_AIR_TURN, "SpecialAirLwTurn"),
        ];
        for (id, want) in ours {
            assert_eq!(name(id), Some(want), "{id:#x}");
        }
        assert_eq!((DOWN_B_GROUND_START, DOWN_B_AIR_START, DOWN_B_AIR_TURN), (0x168, 0x16D, 0x171));
        assert!(is_real_action(characters::FOX, DOWN_B_AIR_START, true));
        assert!(!is_real_action(characters::FOX, DOWN_B_AIR_START, false), "an air state on the ground");
        assert!(!is_real_action(characters::MARTH, DOWN_B_GROUND_START, false), "0x168 is not Marth's shine");
    }
}
