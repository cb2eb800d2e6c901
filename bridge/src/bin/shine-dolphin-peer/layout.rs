//! The peer's own copy of Melee's menu layout, written from the references (the
//! decompilation's `mncharsel.c` and `mn/types.h`, Slippi's `SendMenuFrame.asm`,
//! libmelee's `menuhelper.py` and `enums.py`), not
//! taken from the navigator's `shine_bridge::dolphin::css` and `melee::characters`: a
//! wrong constant there then shows up as a failing peer test instead of agreeing with
//! itself.

/// Main menu: submenu and selection bytes; VS mode is item 1 of the top menu (0),
/// Melee item 0 of the VS submenu (2).
pub const SUBMENU: u32 = 0x804A_04F0;
pub const SELECTION: u32 = 0x804A_04F3;
pub const TOP: u8 = 0;
pub const VS: u8 = 2;

/// Hands (`CSSCursorData`): pointers at 0x804A0BC0 + 4 per port; in the struct the
/// port at +4, the state at +5, what it grabs at +6, x and y at +0xC and +0x10.
pub const HAND_PTRS: u32 = 0x804A_0BC0;
pub const HAND_PORT: u32 = 0x4;
pub const HAND_STATE: u32 = 0x5;
pub const HAND_GRAB: u32 = 0x6;
pub const HAND_X: u32 = 0xC;
pub const HAND_Y: u32 = 0x10;
/// Hand states (`mncharsel.c`): 1 while grabbing (a coin, or a slider until A lets
/// go); otherwise, every frame, 2 for an open hand over the grid's band
/// (`GRID_BAND`), 0 elsewhere; 3 unplugged.
pub const STATE_OPEN: u8 = 0;
pub const STATE_GRABBING: u8 = 1;
pub const STATE_OVER_GRID: u8 = 2;
pub const STATE_UNPLUGGED: u8 = 3;
pub const GRID_BAND: std::ops::RangeInclusive<f32> = 0.2..=22.0;
/// What a grabbing hand holds (+6): the coin of slot n is n, its CPU slider 4 + n.
pub const GRAB_CPU_SLIDER: u8 = 4;

/// Slots (`CSSDoor`, 0x24 bytes a port): `p_kind` at 0x803F0E07, `p_kind_prev` at
/// 0x803F0E08 (the game copies one to the other in the frame of every toggle), the
/// chosen character `sel_icon` at 0x803F0E0A (icon order, 0x19 none), and
/// `is_hold_cpu_slider` at 0x803F0E0E. Kinds: 0 human, 1 CPU, 3 off.
pub const P_KIND: u32 = 0x803F_0E07;
pub const P_KIND_PREV: u32 = 0x803F_0E08;
pub const SEL_ICON: u32 = 0x803F_0E0A;
pub const HOLD_CPU_SLIDER: u32 = 0x803F_0E0E;
pub const SLOT_STRIDE: u32 = 0x24;
pub const NO_ICON: u8 = 0x19;
pub const HUMAN: u8 = 0;
pub const CPU: u8 = 1;
pub const OFF: u8 = 3;
pub fn slot(port: usize, field: u32) -> u32 {
    field + SLOT_STRIDE * port as u32
}
/// CPU levels: 0x8048082F + 0x24 per port.
pub fn level(port: usize) -> u32 {
    0x8048_082F + 0x24 * port as u32
}
/// The "ready to fight" banner: 10 hidden, swooping in to 0.
pub const READY: u32 = 0x804D_6CF2;
pub const READY_HIDDEN: u8 = 10;
/// Stage-select cursor: `*(*(*(0x804D7820)+0x10)+0x28)`, x at +0x38, y at +0x3C.
pub const SSS_ROOT: u32 = 0x804D_7820;

/// The select screen's icons, left to right, top row first (their position is the
/// icon-order byte), with each character's external and internal id.
pub const GRID: [(&str, u8, u8); 25] = [
    ("Dr. Mario", 0x16, 0x15),
    ("Mario", 0x08, 0x00),
    ("Luigi", 0x07, 0x11),
    ("Bowser", 0x05, 0x05),
    ("Peach", 0x0C, 0x09),
    ("Yoshi", 0x11, 0x0E),
    ("Donkey Kong", 0x01, 0x03),
    ("Captain Falcon", 0x00, 0x02),
    ("Ganondorf", 0x19, 0x19),
    ("Falco", 0x14, 0x16),
    ("Fox", 0x02, 0x01),
    ("Ness", 0x0B, 0x08),
    ("Ice Climbers", 0x0E, 0x0A),
    ("Kirby", 0x04, 0x04),
    ("Samus", 0x10, 0x0D),
    ("Zelda", 0x12, 0x13),
    ("Link", 0x06, 0x06),
    ("Young Link", 0x15, 0x14),
    ("Pichu", 0x18, 0x17),
    ("Pikachu", 0x0D, 0x0C),
    ("Jigglypuff", 0x0F, 0x0F),
    ("Mewtwo", 0x0A, 0x10),
    ("Mr. Game & Watch", 0x03, 0x18),
    ("Marth", 0x09, 0x12),
    ("Roy", 0x17, 0x1A),
];

/// The centre of icon `i` (libmelee: 9 a row, 7 units square, rows from y = 1 up, the
/// bottom row one place right of the random slot).
pub fn icon_centre(i: u8) -> (f32, f32) {
    let (row, col) = (i / 9, i % 9);
    let col = if row == 2 { col + 1 } else { col };
    (-32.5 + 3.5 + 7.0 * f32::from(col), 1.0 + 3.5 + 7.0 * f32::from(2 - row))
}

/// Port p's HMN/CPU toggle and its level slider's token at `level` (libmelee, with the
/// token's offsets per level from a libmelee fork).
pub fn toggle(p: usize) -> (f32, f32) {
    (-32.2 + 15.82 * p as f32, -2.2)
}
pub const SLIDER_OFFSETS: [f32; 9] = [0.0, 0.746_401, 1.996_401, 3.483_204, 4.478_405, 5.971_207, 6.966_408, 8.459_207, 9.454_408];
pub fn slider(p: usize, level: u8) -> (f32, f32) {
    (-30.9 + 15.4 * p as f32 + SLIDER_OFFSETS[usize::from(level.clamp(1, 9) - 1)], -15.12)
}
/// Final Destination on the stage-select screen.
pub const FINAL_DESTINATION: (f32, f32) = (6.7, -9.0);
