//! The controller state and Dolphin's named-pipe protocol, both ways.
//!
//! docs/melee-reference.md, section 4: newline-terminated ASCII commands (`PRESS A`, `SET MAIN 0.5 1`,
//! `FLUSH`, ...). Unset inputs persist across frames and the last write in a frame
//! wins, so [`Pad::encode`] always writes the *whole* pad state as one buffer, well
//! under `PIPE_BUF`, which the caller hands to a single `write()`.
//! [`parse_line`] is the other side, for test peers that behave like Dolphin.

use std::fmt::Write as _;
use thiserror::Error;

/// The 12 digital buttons of a GameCube pad, in the protocol's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Button {
    A,
    B,
    X,
    Y,
    Z,
    Start,
    L,
    R,
    DUp,
    DDown,
    DLeft,
    DRight,
}

impl Button {
    pub const ALL: [Button; 12] =
        [Button::A, Button::B, Button::X, Button::Y, Button::Z, Button::Start, Button::L, Button::R, Button::DUp, Button::DDown, Button::DLeft, Button::DRight];
    /// The name the pipe protocol uses.
    pub fn name(self) -> &'static str {
        match self {
            Button::A => "A",
            Button::B => "B",
            Button::X => "X",
            Button::Y => "Y",
            Button::Z => "Z",
            Button::Start => "START",
            Button::L => "L",
            Button::R => "R",
            Button::DUp => "D_UP",
            Button::DDown => "D_DOWN",
            Button::DLeft => "D_LEFT",
            Button::DRight => "D_RIGHT",
        }
    }
    pub fn from_name(s: &str) -> Option<Button> {
        Button::ALL.into_iter().find(|b| b.name() == s)
    }
    fn bit(self) -> u16 {
        1 << self as u8
    }
    /// The bit Melee's own pad struct uses for this button (`0x804C1FAC`, u32).
    pub fn melee_bit(self) -> u32 {
        match self {
            Button::DLeft => 0x0001,
            Button::DRight => 0x0002,
            Button::DDown => 0x0004,
            Button::DUp => 0x0008,
            Button::Z => 0x0010,
            Button::R => 0x0020,
            Button::L => 0x0040,
            Button::A => 0x0100,
            Button::B => 0x0200,
            Button::X => 0x0400,
            Button::Y => 0x0800,
            Button::Start => 0x1000,
        }
    }
}

/// A stick position; each axis in `[0, 1]`, 0.5 is neutral (the protocol's scale).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stick {
    pub x: f32,
    pub y: f32,
}

impl Stick {
    pub const NEUTRAL: Stick = Stick { x: 0.5, y: 0.5 };
    pub const fn new(x: f32, y: f32) -> Self {
        Stick { x, y }
    }
    /// The same position on Melee's `-1..1` scale.
    pub fn to_melee(self) -> (f32, f32) {
        (self.x * 2.0 - 1.0, self.y * 2.0 - 1.0)
    }
}

impl Default for Stick {
    fn default() -> Self {
        Stick::NEUTRAL
    }
}

/// One frame's controller state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pad {
    /// Bit `i` is `Button::ALL[i]` held.
    pub buttons: u16,
    pub main: Stick,
    pub c: Stick,
    /// Analog triggers, `0..1`.
    pub l: f32,
    pub r: f32,
}

impl Pad {
    /// Nothing pressed, sticks neutral, triggers released.
    pub const NEUTRAL: Pad = Pad { buttons: 0, main: Stick::NEUTRAL, c: Stick::NEUTRAL, l: 0.0, r: 0.0 };

    pub fn pressed(&self, b: Button) -> bool {
        self.buttons & b.bit() != 0
    }
    pub fn set(&mut self, b: Button, down: bool) {
        if down {
            self.buttons |= b.bit();
        } else {
            self.buttons &= !b.bit();
        }
    }
    /// Builder: this pad with `b` held.
    pub fn with(mut self, b: Button) -> Self {
        self.set(b, true);
        self
    }
    /// Builder: this pad with the main stick at `(x, y)`.
    pub fn with_main(mut self, x: f32, y: f32) -> Self {
        self.main = Stick::new(x, y);
        self
    }
    /// Builder: this pad with the analog L trigger at `v`.
    pub fn with_l(mut self, v: f32) -> Self {
        self.l = v;
        self
    }
    /// Melee's button word for this pad.
    pub fn melee_buttons(&self) -> u32 {
        Button::ALL.iter().filter(|b| self.pressed(**b)).map(|b| b.melee_bit()).sum()
    }

    /// The whole pad state as pipe commands, one buffer for one `write()`.
    /// With `flush`, ends with `FLUSH` (Slippi's blocking pipes; upstream ignores it).
    pub fn encode(&self, flush: bool) -> String {
        let mut s = String::with_capacity(256);
        self.encode_into(&mut s, flush);
        s
    }

    /// [`Pad::encode`] into a reused buffer (the worker encodes every frame).
    pub fn encode_into(&self, out: &mut String, flush: bool) {
        out.clear();
        for b in Button::ALL {
            let verb = if self.pressed(b) { "PRESS" } else { "RELEASE" };
            let _ = writeln!(out, "{verb} {}", b.name());
        }
        // `{}` prints the shortest text that parses back to the same f32.
        let _ = writeln!(out, "SET MAIN {} {}", self.main.x, self.main.y);
        let _ = writeln!(out, "SET C {} {}", self.c.x, self.c.y);
        let _ = writeln!(out, "SET L {}", self.l);
        let _ = writeln!(out, "SET R {}", self.r);
        if flush {
            out.push_str("FLUSH\n");
        }
    }

    /// Apply one parsed command, as Dolphin's pipe device does.
    pub fn apply(&mut self, cmd: Command) {
        match cmd {
            Command::Press(b) => self.set(b, true),
            Command::Release(b) => self.set(b, false),
            Command::SetMain(x, y) => self.main = Stick::new(x, y),
            Command::SetC(x, y) => self.c = Stick::new(x, y),
            Command::SetL(v) => self.l = v,
            Command::SetR(v) => self.r = v,
            Command::Flush => {}
        }
    }
}

/// One line of the pipe protocol.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Command {
    Press(Button),
    Release(Button),
    SetMain(f32, f32),
    SetC(f32, f32),
    SetL(f32),
    SetR(f32),
    Flush,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PadError {
    #[error("pipe command {line:?}: unknown command")]
    UnknownCommand { line: String },
    #[error("pipe command {line:?}: unknown button (expected one of A B X Y Z START L R D_UP D_DOWN D_LEFT D_RIGHT)")]
    UnknownButton { line: String },
    #[error("pipe command {line:?}: expected {expected} value(s) in [0, 1]")]
    BadValue { line: String, expected: usize },
}

/// Parse one protocol line (without or with its trailing newline).
pub fn parse_line(line: &str) -> Result<Command, PadError> {
    let line = line.trim_end_matches(['\n', '\r']);
    let mut words = line.split_ascii_whitespace();
    let owned = || line.to_string();
    let values = |words: std::str::SplitAsciiWhitespace<'_>, n: usize| -> Result<Vec<f32>, PadError> {
        let v: Vec<f32> = words
            .map(|w| w.parse::<f32>().ok().filter(|v| (0.0..=1.0).contains(v)))
            .collect::<Option<_>>()
            .ok_or(PadError::BadValue { line: owned(), expected: n })?;
        if v.len() == n {
            Ok(v)
        } else {
            Err(PadError::BadValue { line: owned(), expected: n })
        }
    };
    match words.next() {
        Some(verb @ ("PRESS" | "RELEASE")) => {
            let b = match (words.next().and_then(Button::from_name), words.next()) {
                (Some(b), None) => b,
                _ => return Err(PadError::UnknownButton { line: owned() }),
            };
            Ok(if verb == "PRESS" { Command::Press(b) } else { Command::Release(b) })
        }
        Some("SET") => match words.next() {
            Some("MAIN") => values(words, 2).map(|v| Command::SetMain(v[0], v[1])),
            Some("C") => values(words, 2).map(|v| Command::SetC(v[0], v[1])),
            Some("L") => values(words, 1).map(|v| Command::SetL(v[0])),
            Some("R") => values(words, 1).map(|v| Command::SetR(v[0])),
            _ => Err(PadError::UnknownCommand { line: owned() }),
        },
        Some("FLUSH") if words.next().is_none() => Ok(Command::Flush),
        _ => Err(PadError::UnknownCommand { line: owned() }),
    }
}

/// Apply every line of `text` to `pad`; stops at the first bad line, leaving `pad`
/// untouched (bad input changes nothing).
pub fn apply_all(pad: &mut Pad, text: &str) -> Result<(), PadError> {
    let cmds = text.lines().filter(|l| !l.trim().is_empty()).map(parse_line).collect::<Result<Vec<_>, _>>()?;
    for c in cmds {
        pad.apply(c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unit() -> impl Strategy<Value = f32> {
        prop_oneof![Just(0.0f32), Just(0.5), Just(1.0), 0.0f32..=1.0]
    }

    prop_compose! {
        fn any_pad()(buttons in 0u16..(1 << 12), mx in unit(), my in unit(), cx in unit(), cy in unit(), l in unit(), r in unit()) -> Pad {
            Pad { buttons, main: Stick::new(mx, my), c: Stick::new(cx, cy), l, r }
        }
    }

    proptest! {
        #[test]
        fn encode_then_parse_round_trips(pad in any_pad(), before in any_pad(), flush in any::<bool>()) {
            let text = pad.encode(flush);
            prop_assert!(text.len() < 512, "one frame must fit one atomic pipe write");
            let mut got = before; // unset inputs persist, so start from any state
            apply_all(&mut got, &text).unwrap();
            prop_assert_eq!(got, pad);
            prop_assert_eq!(text.ends_with("FLUSH\n"), flush);
        }

        #[test]
        fn parser_never_panics(line in "\\PC{0,40}") {
            let _ = parse_line(&line);
        }
    }

    #[test]
    fn parses_the_reference_examples() {
        assert_eq!(parse_line("PRESS A\n").unwrap(), Command::Press(Button::A));
        assert_eq!(parse_line("RELEASE D_LEFT").unwrap(), Command::Release(Button::DLeft));
        assert_eq!(parse_line("SET MAIN 1.0 0.5").unwrap(), Command::SetMain(1.0, 0.5));
        assert_eq!(parse_line("SET L 1").unwrap(), Command::SetL(1.0));
        assert_eq!(parse_line("FLUSH").unwrap(), Command::Flush);
    }

    #[test]
    fn bad_lines_are_errors() {
        for bad in
            ["", "PRESS", "PRESS Q", "PRESS A B", "SET MAIN 0.5", "SET MAIN 0.5 2", "SET MAIN a b", "SET L -0.1", "SET Q 1", "JUMP", "FLUSH NOW", "SET R NaN"]
        {
            assert!(parse_line(bad).is_err(), "{bad:?} should be rejected");
        }
        let mut pad = Pad::NEUTRAL.with(Button::B);
        assert!(apply_all(&mut pad, "PRESS A\nSET MAIN 3 3\n").is_err());
        assert_eq!(pad, Pad::NEUTRAL.with(Button::B), "a bad batch changes nothing");
    }

    #[test]
    fn melee_button_word() {
        let pad = Pad::NEUTRAL.with(Button::A).with(Button::B).with(Button::Start);
        assert_eq!(pad.melee_buttons(), 0x1300);
    }
}
