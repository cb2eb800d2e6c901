//! Attacks: circular hitboxes placed relative to the fighter, with Melee-like frame
//! data (startup, active frames, total length), damage and knockback.
//!
//! Frame numbers are 1-based like Melee's frame data: a hitbox with `first: 4` is out on
//! the fourth frame of the action. The Marth-like moves reach further and start later;
//! the Fox-like ones are quicker and shorter.
//!
//! Calibration constraint (see `sim/mod.rs`): every move the CPU uses starts its first
//! hitbox on frame >= 4 and keeps hitboxes out for at most 8 consecutive frames, and
//! `total + first >= 28`, so that a spot dodge started on seeing the move (the bot sees
//! frame 1 a frame late) can cover it, and a second attack cannot land before the
//! dodger can dodge again.

use crate::melee::action;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attack {
    Jab,
    Ftilt,
    Utilt,
    Dtilt,
    DashAttack,
    Fsmash,
    Usmash,
    Dsmash,
    Nair,
    Fair,
    Bair,
    Uair,
    Dair,
    /// Fox's reflector: a frame-1 hitbox with set knockback.
    Shine,
}

impl Attack {
    /// The Melee action state of this attack.
    pub fn action(self) -> u32 {
        match self {
            Attack::Jab => action::NEUTRAL_ATTACK_1,
            Attack::Ftilt => action::FTILT_MID,
            Attack::Utilt => action::UPTILT,
            Attack::Dtilt => action::DOWNTILT,
            Attack::DashAttack => action::DASH_ATTACK,
            Attack::Fsmash => action::FSMASH_MID,
            Attack::Usmash => action::UPSMASH,
            Attack::Dsmash => action::DOWNSMASH,
            Attack::Nair => action::NAIR,
            Attack::Fair => action::FAIR,
            Attack::Bair => action::BAIR,
            Attack::Uair => action::UAIR,
            Attack::Dair => action::DAIR,
            Attack::Shine => action::DOWN_B_GROUND_START,
        }
    }

    pub fn is_aerial(self) -> bool {
        matches!(self, Attack::Nair | Attack::Fair | Attack::Bair | Attack::Uair | Attack::Dair)
    }

    pub fn is_smash(self) -> bool {
        matches!(self, Attack::Fsmash | Attack::Usmash | Attack::Dsmash)
    }

    /// The landing-lag action state of an aerial.
    pub fn landing_action(self) -> Option<u32> {
        match self {
            Attack::Nair => Some(action::NAIR_LANDING),
            Attack::Fair => Some(action::FAIR_LANDING),
            Attack::Bair => Some(action::BAIR_LANDING),
            Attack::Uair => Some(action::UAIR_LANDING),
            Attack::Dair => Some(action::DAIR_LANDING),
            _ => None,
        }
    }
}

/// A circle, offset from the fighter's feet (`dx` is along its facing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hitbox {
    pub first: u32,
    pub last: u32,
    pub dx: f32,
    pub dy: f32,
    pub radius: f32,
    pub damage: f32,
    /// Degrees; 361 is the Sakurai angle.
    pub angle: f32,
    /// Knockback growth and base knockback.
    pub kbg: f32,
    pub bkb: f32,
    /// Set knockback (0 = none).
    pub wbkb: f32,
}

impl Hitbox {
    pub fn active(&self, frame: u32) -> bool {
        (self.first..=self.last).contains(&frame)
    }
}

#[allow(clippy::too_many_arguments)]
const fn hb(first: u32, last: u32, dx: f32, dy: f32, radius: f32, damage: f32, angle: f32, kbg: f32, bkb: f32) -> Hitbox {
    Hitbox { first, last, dx, dy, radius, damage, angle, kbg, bkb, wbkb: 0.0 }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttackData {
    /// Frames until the fighter is actionable again.
    pub total: u32,
    pub hitboxes: &'static [Hitbox],
    /// Landing lag when an aerial lands before it ends.
    pub landing_lag: u32,
    /// Smash attacks hold on this frame while A / the C-stick stays held (0: no charge).
    pub charge_frame: u32,
}

impl AttackData {
    /// First and last frame any hitbox is out.
    pub fn active_window(&self) -> (u32, u32) {
        let first = self.hitboxes.iter().map(|h| h.first).min().unwrap_or(0);
        let last = self.hitboxes.iter().map(|h| h.last).max().unwrap_or(0);
        (first, last)
    }
}

const fn ground(total: u32, hitboxes: &'static [Hitbox]) -> AttackData {
    AttackData { total, hitboxes, landing_lag: 0, charge_frame: 0 }
}
const fn smash(total: u32, charge_frame: u32, hitboxes: &'static [Hitbox]) -> AttackData {
    AttackData { total, hitboxes, landing_lag: 0, charge_frame }
}
const fn aerial(total: u32, landing_lag: u32, hitboxes: &'static [Hitbox]) -> AttackData {
    AttackData { total, hitboxes, landing_lag, charge_frame: 0 }
}

/// One character's moves.
#[derive(Debug)]
pub struct Moveset {
    pub jab: AttackData,
    pub ftilt: AttackData,
    pub utilt: AttackData,
    pub dtilt: AttackData,
    pub dash_attack: AttackData,
    pub fsmash: AttackData,
    pub usmash: AttackData,
    pub dsmash: AttackData,
    pub nair: AttackData,
    pub fair: AttackData,
    pub bair: AttackData,
    pub uair: AttackData,
    pub dair: AttackData,
    pub shine: Option<AttackData>,
}

impl Moveset {
    pub fn get(&self, a: Attack) -> Option<&AttackData> {
        Some(match a {
            Attack::Jab => &self.jab,
            Attack::Ftilt => &self.ftilt,
            Attack::Utilt => &self.utilt,
            Attack::Dtilt => &self.dtilt,
            Attack::DashAttack => &self.dash_attack,
            Attack::Fsmash => &self.fsmash,
            Attack::Usmash => &self.usmash,
            Attack::Dsmash => &self.dsmash,
            Attack::Nair => &self.nair,
            Attack::Fair => &self.fair,
            Attack::Bair => &self.bair,
            Attack::Uair => &self.uair,
            Attack::Dair => &self.dair,
            Attack::Shine => return self.shine.as_ref(),
        })
    }
}

/// Fox-like: quick, short.
pub static FOX: Moveset = Moveset {
    jab: ground(17, &[hb(2, 3, 7.0, 7.0, 4.5, 4.0, 361.0, 100.0, 0.0)]),
    ftilt: ground(26, &[hb(5, 8, 10.0, 7.0, 5.0, 9.0, 361.0, 100.0, 5.0)]),
    utilt: ground(23, &[hb(5, 11, 2.0, 13.0, 6.5, 12.0, 100.0, 120.0, 18.0)]),
    dtilt: ground(28, &[hb(7, 9, 9.0, 2.5, 5.0, 10.0, 80.0, 125.0, 20.0)]),
    dash_attack: ground(40, &[hb(4, 11, 8.0, 6.0, 5.5, 7.0, 72.0, 90.0, 30.0)]),
    fsmash: smash(40, 9, &[hb(12, 22, 12.0, 7.0, 6.0, 15.0, 361.0, 100.0, 16.0)]),
    usmash: smash(41, 5, &[hb(7, 17, 0.0, 14.0, 7.0, 17.0, 80.0, 112.0, 20.0)]),
    dsmash: smash(48, 4, &[hb(6, 10, 9.0, 2.0, 5.0, 15.0, 25.0, 65.0, 25.0), hb(6, 10, -9.0, 2.0, 5.0, 15.0, 25.0, 65.0, 25.0)]),
    nair: aerial(49, 15, &[hb(4, 14, 0.0, 6.0, 7.0, 12.0, 361.0, 100.0, 0.0)]),
    fair: aerial(40, 22, &[hb(6, 20, 8.0, 5.0, 6.0, 7.0, 361.0, 100.0, 0.0)]),
    bair: aerial(39, 20, &[hb(4, 19, -8.0, 6.0, 6.0, 15.0, 361.0, 100.0, 0.0)]),
    uair: aerial(39, 18, &[hb(8, 15, 0.0, 14.0, 7.0, 13.0, 80.0, 110.0, 20.0)]),
    dair: aerial(49, 32, &[hb(5, 24, 0.0, 0.0, 6.0, 8.0, 290.0, 100.0, 10.0)]),
    shine: Some(AttackData {
        total: 3,
        hitboxes: &[Hitbox { first: 1, last: 1, dx: 0.0, dy: 6.0, radius: 8.0, damage: 5.0, angle: 20.0, kbg: 100.0, bkb: 0.0, wbkb: 40.0 }],
        landing_lag: 0,
        charge_frame: 0,
    }),
};

/// Marth-like: long reach, later hitboxes, more endlag.
pub static MARTH: Moveset = Moveset {
    jab: ground(24, &[hb(4, 7, 14.0, 9.0, 6.5, 4.0, 361.0, 50.0, 10.0)]),
    ftilt: ground(35, &[hb(7, 10, 19.0, 9.0, 8.0, 12.0, 361.0, 70.0, 10.0)]),
    utilt: ground(32, &[hb(6, 12, 4.0, 17.0, 10.0, 11.0, 90.0, 120.0, 18.0)]),
    dtilt: ground(24, &[hb(7, 9, 20.0, 2.5, 6.5, 9.0, 30.0, 70.0, 20.0)]),
    dash_attack: ground(40, &[hb(8, 12, 14.0, 8.0, 8.0, 11.0, 45.0, 70.0, 40.0)]),
    fsmash: smash(48, 5, &[hb(10, 13, 23.0, 9.0, 9.5, 18.0, 361.0, 80.0, 70.0)]),
    usmash: smash(46, 6, &[hb(13, 17, 2.0, 22.0, 10.0, 17.0, 90.0, 80.0, 60.0)]),
    dsmash: smash(60, 3, &[hb(5, 9, 18.0, 2.0, 7.0, 13.0, 30.0, 70.0, 60.0), hb(20, 24, -18.0, 2.0, 7.0, 16.0, 30.0, 70.0, 60.0)]),
    nair: aerial(50, 15, &[hb(6, 12, 0.0, 9.0, 13.0, 9.0, 361.0, 100.0, 0.0)]),
    fair: aerial(30, 10, &[hb(4, 7, 14.0, 8.0, 10.0, 11.0, 361.0, 75.0, 10.0)]),
    bair: aerial(35, 15, &[hb(7, 10, -14.0, 8.0, 10.0, 11.0, 361.0, 70.0, 20.0)]),
    uair: aerial(36, 15, &[hb(5, 9, 0.0, 20.0, 11.0, 11.0, 80.0, 70.0, 30.0)]),
    dair: aerial(48, 20, &[hb(6, 8, 0.0, -2.0, 9.0, 13.0, 290.0, 80.0, 20.0)]),
    shine: None,
};

/// A fighter's hurtbox: a vertical capsule standing on `(x, y)`, `height` tall and
/// `radius` wide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hurtbox {
    pub x: f32,
    pub y: f32,
    pub height: f32,
    pub radius: f32,
}

/// Whether `hb`, put out by a fighter standing at `(ax, ay)` facing `facing`, touches
/// `target`. `margin` shrinks the reach (the CPU's estimate of "safely in range").
pub fn hitbox_touches(hb: &Hitbox, ax: f32, ay: f32, facing: f32, target: &Hurtbox, margin: f32) -> bool {
    let Hurtbox { x: tx, y: ty, height, radius: r } = *target;
    let (cx, cy) = (ax + facing * hb.dx, ay + hb.dy);
    let (lo, hi) = (ty + r, ty + (height - r).max(r));
    let ny = cy.clamp(lo, hi);
    let (ddx, ddy) = (cx - tx, cy - ny);
    let reach = hb.radius + r - margin;
    reach > 0.0 && ddx * ddx + ddy * ddy <= reach * reach
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calibration rests on these numbers; see the module docs.
    #[test]
    fn cpu_moves_are_dodgeable_by_reaction() {
        for a in [Attack::Jab, Attack::Ftilt, Attack::Utilt, Attack::Dtilt, Attack::Fsmash, Attack::Nair, Attack::Fair] {
            let d = MARTH.get(a).unwrap();
            let (first, last) = d.active_window();
            assert!(first >= 4, "{a:?} starts on frame {first}");
            assert!(last - first < 8, "{a:?} is out for too long");
            assert!(d.total + first >= 28, "{a:?} recovers too fast");
        }
    }

    #[test]
    fn marth_outreaches_fox() {
        let reach = |m: &Moveset, a| m.get(a).unwrap().hitboxes.iter().map(|h| h.dx + h.radius).fold(0.0, f32::max);
        for a in [Attack::Jab, Attack::Ftilt, Attack::Dtilt, Attack::Fsmash] {
            assert!(reach(&MARTH, a) > reach(&FOX, a), "{a:?}");
            assert!(MARTH.get(a).unwrap().active_window().0 >= FOX.get(a).unwrap().active_window().0 || a == Attack::Fsmash, "{a:?}");
        }
    }

    #[test]
    fn hurtbox_capsule_geometry() {
        let h = hb(1, 1, 10.0, 5.0, 3.0, 1.0, 0.0, 0.0, 0.0);
        let at = |x: f32, y: f32| Hurtbox { x, y, height: 12.0, radius: 4.0 };
        // Centre at x = 10, the capsule at x = 16 with radius 4: gap 6 < 7.
        assert!(hitbox_touches(&h, 0.0, 0.0, 1.0, &at(16.0, 0.0), 0.0));
        assert!(!hitbox_touches(&h, 0.0, 0.0, 1.0, &at(17.5, 0.0), 0.0));
        assert!(!hitbox_touches(&h, 0.0, 0.0, -1.0, &at(16.0, 0.0), 0.0), "facing away");
        assert!(!hitbox_touches(&h, 0.0, 0.0, 1.0, &at(16.0, 0.0), 2.0), "a margin shortens reach");
        // Above the head: the capsule's top (y 8) plus radius reaches y 12.
        assert!(hitbox_touches(&h, 15.0, 10.0, 1.0, &at(25.0, 0.0), 0.0));
        assert!(!hitbox_touches(&h, 15.0, 20.0, 1.0, &at(25.0, 0.0), 0.0));
    }
}
