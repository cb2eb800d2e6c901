//! What a fighter makes of a [`Pad`]: sticks on Melee's -1..1 scale and the button
//! *presses* (edges) that Melee's action states react to.
//!
//! Pads come from outside (the bot, a pipe peer, a test), so every float is sanitised:
//! NaN reads as neutral and values are clamped to their range. No input can panic.

use crate::pad::{Button, Pad, Stick};

/// Stick past this is a "tilt" (walk, tilt attack, turn).
pub const TILT: f32 = 0.3;
/// Stick past this is a "smash" position (dash, smash attack, dodge, roll).
pub const SMASH: f32 = 0.7;
/// Analog trigger past this holds the shield even without the digital click.
const TRIGGER_SHIELD: f32 = 0.3;

/// One frame of interpreted input.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Input {
    /// Main stick, -1..1 (right / up positive).
    pub x: f32,
    pub y: f32,
    /// C-stick, -1..1.
    pub cx: f32,
    pub cy: f32,
    pub a: bool,
    pub a_press: bool,
    pub b: bool,
    pub b_press: bool,
    pub jump: bool,
    pub jump_press: bool,
    pub shield: bool,
    pub shield_press: bool,
    /// The main stick reached a smash x position from near neutral within 3 frames
    /// (Melee's dash / smash-attack input).
    pub smash_x: bool,
    /// The C-stick was pushed out of neutral this frame.
    pub c_press: bool,
    /// Anything at all pressed or pushed (leaves the respawn platform).
    pub any: bool,
}

/// Remembers the last frames' input to find presses and stick flicks.
#[derive(Debug, Clone, Copy, Default)]
pub struct InputTracker {
    prev: Input,
    /// |main x| of the last three frames, newest first.
    hist_x: [f32; 3],
}

fn unit(v: f32) -> f32 {
    if v.is_nan() {
        0.5
    } else {
        v.clamp(0.0, 1.0)
    }
}

fn trigger(v: f32) -> f32 {
    if v.is_nan() {
        0.0
    } else {
        v.clamp(0.0, 1.0)
    }
}

/// `pad` with every float in range (NaN as neutral / released).
pub fn sanitize(pad: &Pad) -> Pad {
    Pad {
        buttons: pad.buttons,
        main: Stick::new(unit(pad.main.x), unit(pad.main.y)),
        c: Stick::new(unit(pad.c.x), unit(pad.c.y)),
        l: trigger(pad.l),
        r: trigger(pad.r),
    }
}

impl InputTracker {
    pub fn read(&mut self, pad: &Pad) -> Input {
        let pad = sanitize(pad);
        let (x, y) = pad.main.to_melee();
        let (cx, cy) = pad.c.to_melee();
        let a = pad.pressed(Button::A);
        let b = pad.pressed(Button::B);
        let jump = pad.pressed(Button::X) || pad.pressed(Button::Y);
        let shield = pad.pressed(Button::L) || pad.pressed(Button::R) || pad.l >= TRIGGER_SHIELD || pad.r >= TRIGGER_SHIELD;
        let c_out = cx.abs().max(cy.abs()) >= SMASH;
        let prev_c_out = self.prev.cx.abs().max(self.prev.cy.abs()) >= SMASH;
        let smash_x = x.abs() >= SMASH && self.hist_x.iter().any(|h| *h < TILT);
        let input = Input {
            x,
            y,
            cx,
            cy,
            a,
            a_press: a && !self.prev.a,
            b,
            b_press: b && !self.prev.b,
            jump,
            jump_press: jump && !self.prev.jump,
            shield,
            shield_press: shield && !self.prev.shield,
            smash_x,
            c_press: c_out && !prev_c_out,
            any: pad.buttons != 0 || x.abs() >= TILT || y.abs() >= TILT || c_out,
        };
        self.hist_x = [x.abs(), self.hist_x[0], self.hist_x[1]];
        self.prev = input;
        input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presses_are_edges_and_garbage_is_neutral() {
        let mut t = InputTracker::default();
        let b = Pad::NEUTRAL.with(Button::B);
        assert!(t.read(&b).b_press);
        assert!(!t.read(&b).b_press, "holding is not pressing");
        let nan = Pad { main: Stick::new(f32::NAN, 7.0), l: f32::NAN, ..Pad::NEUTRAL };
        let i = t.read(&nan);
        assert_eq!((i.x, i.y), (0.0, 1.0));
        assert!(!i.shield);
    }

    #[test]
    fn dash_needs_a_flick() {
        let mut t = InputTracker::default();
        let right = Pad::NEUTRAL.with_main(1.0, 0.5);
        assert!(t.read(&right).smash_x);
        t.read(&right);
        t.read(&right);
        assert!(!t.read(&right).smash_x, "a held stick is not a new flick");
    }
}
