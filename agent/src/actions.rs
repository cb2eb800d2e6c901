//! Action sets: each action is a macro, a short script of pads, one per frame.
//!
//! - [`ActionSet::Untouchable`]: the paper's five macro-actions (docs/melee-reference.md, section 1):
//!   nothing, shine then jump out, spot dodge, roll left, roll right.
//! - [`ActionSet::Fight`]: discrete pad states for fighting, each held 4 frames.
//!
//! Scripts are built once and borrowed: the worker looks them up every decision.

use shine_bridge::pad::{Button, Pad, Stick};
use std::sync::OnceLock;

/// Stick y docs/melee-reference.md (section 1) gives for rolls: `(0, 89/255)` and `(1, 89/255)`.
const ROLL_Y: f32 = 89.0 / 255.0;
const DOWN: Stick = Stick::new(0.5, 0.0);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionSet {
    Untouchable,
    Fight,
}

/// Index of "nothing" in every action set (the idle policy; the paper's reward).
pub const NOTHING: usize = 0;

/// The paper's macro-actions, in the order of [`ActionSet::Untouchable`].
pub mod untouchable {
    pub const NOTHING: usize = 0;
    pub const SHINE: usize = 1;
    pub const SPOT_DODGE: usize = 2;
    pub const ROLL_LEFT: usize = 3;
    pub const ROLL_RIGHT: usize = 4;
}

pub struct Macro {
    pub name: &'static str,
    pub script: Vec<Pad>,
}

fn repeat(pad: Pad, n: usize) -> impl Iterator<Item = Pad> {
    std::iter::repeat_n(pad, n)
}

fn untouchable_macros() -> Vec<Macro> {
    let n = Pad::NEUTRAL;
    let shield_down = Pad { main: DOWN, ..n.with(Button::L).with_l(1.0) };
    let roll = |x: f32| Pad { main: Stick::new(x, ROLL_Y), ..n.with(Button::L).with_l(1.0) };
    vec![
        Macro { name: "nothing", script: vec![n] },
        Macro {
            name: "shine",
            // B + down, hold the reflector briefly, jump out (X), let the jump start.
            script: repeat(Pad { main: DOWN, ..n.with(Button::B) }, 1)
                .chain(repeat(Pad { main: DOWN, ..n }, 2))
                .chain(repeat(n.with(Button::X), 1))
                .chain(repeat(n, 4))
                .collect(),
        },
        // Reference: 10 frames L + down, 12 neutral.
        Macro { name: "spot_dodge", script: repeat(shield_down, 10).chain(repeat(n, 12)).collect() },
        Macro { name: "roll_left", script: repeat(roll(0.0), 10).chain(repeat(n, 20)).collect() },
        Macro { name: "roll_right", script: repeat(roll(1.0), 10).chain(repeat(n, 20)).collect() },
    ]
}

fn fight_macros() -> Vec<Macro> {
    const HOLD: usize = 4;
    let n = Pad::NEUTRAL;
    let held = |name, pad: Pad| Macro { name, script: repeat(pad, HOLD).collect() };
    // A button press on the first frame with the stick held throughout.
    let press =
        |name, b: Button, main: Stick| Macro { name, script: std::iter::once(Pad { main, ..n.with(b) }).chain(repeat(Pad { main, ..n }, HOLD - 1)).collect() };
    let c = |name, x: f32, y: f32| Macro { name, script: std::iter::once(Pad { c: Stick::new(x, y), ..n }).chain(repeat(n, HOLD - 1)).collect() };
    let (l, r, up, mid) = (Stick::new(0.0, 0.5), Stick::new(1.0, 0.5), Stick::new(0.5, 1.0), Stick::NEUTRAL);
    vec![
        held("nothing", n),
        held("left", Pad { main: l, ..n }),
        held("right", Pad { main: r, ..n }),
        held("crouch", Pad { main: DOWN, ..n }),
        press("jump", Button::X, mid),
        press("jump_left", Button::X, l),
        press("jump_right", Button::X, r),
        press("jab", Button::A, mid),
        press("ftilt_left", Button::A, Stick::new(0.2, 0.5)),
        press("ftilt_right", Button::A, Stick::new(0.8, 0.5)),
        press("utilt", Button::A, Stick::new(0.5, 0.8)),
        press("dtilt", Button::A, Stick::new(0.5, 0.2)),
        c("smash_left", 0.0, 0.5),
        c("smash_right", 1.0, 0.5),
        c("smash_up", 0.5, 1.0),
        c("smash_down", 0.5, 0.0),
        press("special", Button::B, mid),
        press("shine", Button::B, DOWN),
        press("up_special", Button::B, up),
        held("shield", Pad { r: 1.0, ..n.with(Button::R) }),
        held("spot_dodge", Pad { main: DOWN, ..n.with(Button::L).with_l(1.0) }),
        held("roll_left", Pad { main: l, ..n.with(Button::L).with_l(1.0) }),
        held("roll_right", Pad { main: r, ..n.with(Button::L).with_l(1.0) }),
    ]
}

impl ActionSet {
    pub const ALL: [ActionSet; 2] = [ActionSet::Untouchable, ActionSet::Fight];

    /// The name in configs, model metadata and the API.
    pub fn name(self) -> &'static str {
        match self {
            ActionSet::Untouchable => "untouchable",
            ActionSet::Fight => "fight",
        }
    }

    pub fn from_name(s: &str) -> Option<ActionSet> {
        ActionSet::ALL.into_iter().find(|a| a.name() == s)
    }

    pub fn macros(self) -> &'static [Macro] {
        static U: OnceLock<Vec<Macro>> = OnceLock::new();
        static F: OnceLock<Vec<Macro>> = OnceLock::new();
        match self {
            ActionSet::Untouchable => U.get_or_init(untouchable_macros),
            ActionSet::Fight => F.get_or_init(fight_macros),
        }
    }

    pub fn len(self) -> usize {
        self.macros().len()
    }

    /// Never true; here because clippy expects it beside `len`.
    pub fn is_empty(self) -> bool {
        false
    }

    /// The per-frame pads of action `a`; `None` when `a` is out of range.
    pub fn script(self, a: usize) -> Option<&'static [Pad]> {
        self.macros().get(a).map(|m| m.script.as_slice())
    }

    pub fn action_name(self, a: usize) -> &'static str {
        self.macros().get(a).map_or("?", |m| m.name)
    }

    /// Whether action `a` is the shine (sets the state's shine flag).
    pub fn is_shine(self, a: usize) -> bool {
        self.action_name(a) == "shine"
    }
}

impl std::fmt::Display for ActionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ActionSet {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ActionSet::from_name(s).ok_or_else(|| format!("unknown action set {s:?} (expected untouchable or fight)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouchable_matches_the_reference() {
        let set = ActionSet::Untouchable;
        assert_eq!(set.len(), 5);
        assert_eq!(set.script(untouchable::NOTHING).unwrap(), &[Pad::NEUTRAL]);
        let dodge = set.script(untouchable::SPOT_DODGE).unwrap();
        assert_eq!(dodge.len(), 22);
        assert!(dodge[..10].iter().all(|p| p.pressed(Button::L) && p.main == DOWN));
        assert!(dodge[10..].iter().all(|p| *p == Pad::NEUTRAL));
        let left = set.script(untouchable::ROLL_LEFT).unwrap()[0];
        assert_eq!((left.main.x, left.main.y), (0.0, 89.0 / 255.0));
        let shine = set.script(untouchable::SHINE).unwrap();
        assert!(shine[0].pressed(Button::B) && shine[0].main == DOWN);
        assert!(shine.iter().any(|p| p.pressed(Button::X)), "shine jumps out");
        assert!(set.is_shine(untouchable::SHINE) && !set.is_shine(untouchable::SPOT_DODGE));
    }

    #[test]
    fn every_action_has_a_script_and_names_round_trip() {
        for set in ActionSet::ALL {
            assert_eq!(ActionSet::from_name(set.name()), Some(set));
            assert_eq!(set.action_name(NOTHING), "nothing");
            for a in 0..set.len() {
                assert!(!set.script(a).unwrap().is_empty());
            }
            assert!(set.script(set.len()).is_none());
        }
    }
}
