//! Final Destination and Melee's knockback arithmetic.
//!
//! Units are Melee's: positions in stage units, speeds in units per frame, 60 frames/s.

/// Final Destination's main stage: flat at y = 0 between these x (no ledges modelled).
pub const STAGE_EDGE: f32 = 85.57;
pub const BLAST_LEFT: f32 = -246.0;
pub const BLAST_RIGHT: f32 = 246.0;
pub const BLAST_TOP: f32 = 188.0;
pub const BLAST_BOTTOM: f32 = -140.0;

/// Knockback speed lost per frame, along the launch direction (Melee: 0.051).
pub const KB_DECAY: f32 = 0.051;
/// Launch speed per unit of knockback (Melee: 0.03).
pub const KB_SPEED: f32 = 0.03;
/// Knockback above this tumbles (Melee: 80).
pub const TUMBLE_KB: f32 = 80.0;

/// Where a fighter is relative to the blast zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlastZone {
    Left,
    Right,
    Top,
    Bottom,
}

pub fn blast_zone(x: f32, y: f32) -> Option<BlastZone> {
    if x < BLAST_LEFT {
        Some(BlastZone::Left)
    } else if x > BLAST_RIGHT {
        Some(BlastZone::Right)
    } else if y > BLAST_TOP {
        Some(BlastZone::Top)
    } else if y < BLAST_BOTTOM {
        Some(BlastZone::Bottom)
    } else {
        None
    }
}

/// Melee's knockback: `((((p/10 + p*d/20) * 200/(w+100) * 1.4) + 18) * g/100) + b`,
/// with `p` the target's percent after the hit. A set ("weight-based") knockback
/// `wbkb > 0` stands in for the hit as the game does (`p = 10`, `d = wbkb`), so the
/// result does not grow with percent.
pub fn knockback(percent_after: f32, damage: f32, weight: f32, kbg: f32, bkb: f32, wbkb: f32) -> f32 {
    let (p, d) = if wbkb > 0.0 { (10.0, wbkb) } else { (percent_after, damage) };
    let kb = ((p / 10.0 + p * d / 20.0) * (200.0 / (weight + 100.0)) * 1.4 + 18.0) * (kbg / 100.0) + bkb;
    kb.clamp(0.0, 2500.0)
}

/// Hitlag of both fighters when a hit connects: `floor(d/3) + 3` frames.
pub fn hitlag(damage: f32) -> u32 {
    (damage.max(0.0) / 3.0).floor() as u32 + 3
}

/// Hitstun: `floor(kb * 0.4)` frames.
pub fn hitstun(kb: f32) -> u32 {
    (kb * 0.4).floor() as u32
}

/// Shield stun: `floor((d + 4.45) / 2.235)` frames.
pub fn shield_stun(damage: f32) -> u32 {
    ((damage.max(0.0) + 4.45) / 2.235).floor() as u32
}

/// The launch angle in radians. 361 is Melee's "Sakurai angle": flat for weak hits on
/// grounded targets, 44 degrees otherwise.
pub fn launch_angle(angle_deg: f32, kb: f32, grounded: bool) -> f32 {
    let deg = if angle_deg == 361.0 {
        if grounded && kb < 32.0 {
            0.0
        } else {
            44.0
        }
    } else {
        angle_deg
    };
    deg.to_radians()
}

/// One frame of knockback decay: the speed shrinks by [`KB_DECAY`] along its direction.
pub fn decay(vx: f32, vy: f32) -> (f32, f32) {
    let speed = (vx * vx + vy * vy).sqrt();
    if speed <= KB_DECAY {
        (0.0, 0.0)
    } else {
        let k = (speed - KB_DECAY) / speed;
        (vx * k, vy * k)
    }
}

/// `v` moved toward `target` by at most `step`.
pub fn approach(v: f32, target: f32, step: f32) -> f32 {
    if v < target {
        (v + step).min(target)
    } else {
        (v - step).max(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knockback_grows_with_percent_and_shrinks_with_weight() {
        let low = knockback(10.0, 10.0, 75.0, 100.0, 0.0, 0.0);
        let high = knockback(100.0, 10.0, 75.0, 100.0, 0.0, 0.0);
        let heavy = knockback(100.0, 10.0, 110.0, 100.0, 0.0, 0.0);
        assert!(high > low && heavy < high);
        // ((1 + 5) * 200/175 * 1.4 + 18) = 27.6
        assert!((low - 27.6).abs() < 0.01, "{low}");
        let set = knockback(0.0, 5.0, 75.0, 100.0, 0.0, 40.0);
        assert_eq!(set, knockback(150.0, 5.0, 75.0, 100.0, 0.0, 40.0));
    }

    #[test]
    fn hitlag_and_hitstun_follow_melee() {
        assert_eq!(hitlag(9.0), 6);
        assert_eq!(hitlag(4.0), 4);
        assert_eq!(hitstun(100.0), 40);
        assert_eq!(decay(0.0, 0.0), (0.0, 0.0));
        let (x, y) = decay(3.0, 4.0);
        assert!(((x * x + y * y).sqrt() - (5.0 - KB_DECAY)).abs() < 1e-5);
    }
}
