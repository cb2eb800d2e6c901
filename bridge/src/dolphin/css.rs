//! Melee's menus as RAM and screen geometry (NTSC 1.02): every address, value and
//! coordinate the menu navigator reads or steers to, with its source, in one place.
//! The test peer (`shine-dolphin-peer`) writes the same layout, so a wrong constant
//! here is caught only by the sources named below, and by a real disc
//! (`shine-worker doctor --iso`). The ids of the characters live in
//! [`crate::melee::characters`].
//!
//! Sources (the public code Melee bot authors rely on; `docs/dolphin.md` cites them per
//! value, with repository, path and line):
//! - The decompilation of Melee (doldecomp/melee, `src/melee/mn/mncharsel.c` and
//!   `mn/types.h`, whose offsets match the game byte for byte): the hand's state and
//!   grab bytes, the slot (`CSSDoor`: `p_kind`, `p_kind_prev`, `sel_icon`,
//!   `is_hold_cpu_slider`), the ready check, the toggle's cycle.
//! - Slippi's `SendMenuFrame.asm` (project-slippi/slippi-ssbm-asm pull request 16, and
//!   the longer version on vladfi1's `libmelee-recording` branch that libmelee 0.47
//!   ships): the scene word, the hands, the slot bytes, the ready banner, the
//!   stage-select cursor, the submenu, the menu selection, the CPU level and the
//!   "holding the slider" byte.
//! - libmelee's `menuhelper.py` and `enums.py`: the icon grid, the HMN/CPU toggles, the
//!   level slider, Final Destination on the stage screen, the main-menu walk, the
//!   wiggle room.
//! - The paper's code (bparr/melee-ai `menu_manager.py`, `cpu.py`, `dolphin.py`): the
//!   stick tilt scaled by the distance, the repeated quit, no memory cards, one pipe
//!   per port.

use crate::ram::{addr, is_mem1_pointer, RamError, RamView};

/// Scene values: the major scene byte ([`addr::SCENE`], 0x80479D30) and the minor one
/// ([`addr::MENU`], 0x80479D33). Slippi exports them as one word, minor in the high
/// byte (0x0202 = versus, in game); the decompilation's `MJ_TITLE`, `MJ_MENU`, `MJ_VS`.
pub mod scene {
    pub const MAJOR_TITLE: u8 = 0x00;
    pub const MAJOR_MAIN_MENU: u8 = 0x01;
    pub const MAJOR_VS: u8 = 0x02;
    pub const CSS: u8 = 0;
    pub const STAGE_SELECT: u8 = 1;
    pub const IN_GAME: u8 = 2;
    pub const SUDDEN_DEATH: u8 = 3;
    pub const POSTGAME: u8 = 4;
}

/// The main menu (major scene 1): which submenu is open and which item the cursor is
/// on (Slippi: 0x804A04F0, 0x804A04F3; libmelee `SubMenu` and `choose_versus_mode`).
pub mod main_menu {
    pub const SUBMENU: u32 = 0x804A_04F0;
    pub const SELECTION: u32 = 0x804A_04F3;
    /// The top level: 1P mode, VS mode, trophies, options, data.
    pub const TOP: u8 = 0;
    pub const TOP_VS_MODE: u8 = 1;
    /// The VS mode submenu: "Melee" (a normal match) is its first item.
    pub const VS: u8 = 2;
    pub const VS_MELEE: u8 = 0;
}

/// Each port's hand on the character-select screen: a pointer at `HAND_PTR + 4 * port`
/// to a struct (the decompilation's `CSSCursorData`, `mnCharSel_804A0BC0[4]`; Slippi
/// follows it only on this screen, it is stale elsewhere).
pub const HAND_PTR: u32 = 0x804A_0BC0;
/// In the hand struct: what the hand is doing (u8, [`HandState`]), what it grabs (u8,
/// [`Grab`]), then x and y (f32, cursor units).
pub const HAND_STATE: u32 = 0x05;
pub const HAND_GRAB: u32 = 0x06;
pub const HAND_X: u32 = 0x0C;
pub const HAND_Y: u32 = 0x10;

/// The hand's state byte (+5), as the decompilation sets it (`mncharsel.c`): 1 while
/// the hand grabs something (a coin, or a slider, until A lets go), otherwise recomputed
/// every frame from the hand's height: 2 over the character grid's band
/// (0.2 <= y <= 22), 0 elsewhere, whether or not its coin is down. Slippi's comment
/// calls 2 "coin down", which is why libmelee tests `coin_down or cursor_y < 0`; it is
/// only an open hand over the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandState {
    /// An open hand off the grid's band (the toggles, the sliders, the name tags).
    Open,
    /// Grabbing a coin or a slider ([`HAND_GRAB`] says which).
    Grabbing,
    /// An open hand over the grid's band.
    OverGrid,
    /// Its controller is unplugged; the hand is hidden.
    Unplugged,
    Other(u8),
}

impl HandState {
    pub fn from_byte(b: u8) -> HandState {
        match b {
            0 => HandState::Open,
            1 => HandState::Grabbing,
            2 => HandState::OverGrid,
            3 => HandState::Unplugged,
            other => HandState::Other(other),
        }
    }
    pub fn byte(self) -> u8 {
        match self {
            HandState::Open => 0,
            HandState::Grabbing => 1,
            HandState::OverGrid => 2,
            HandState::Unplugged => 3,
            HandState::Other(b) => b,
        }
    }
}

/// What a grabbing hand holds (the byte at +6, meaningful while the state is
/// [`HandState::Grabbing`]): 0..=3 the coin of that port's slot, 4..=7 the CPU-level
/// slider of slot (byte - 4), 8..=11 the handicap slider of slot (byte - 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grab {
    Coin(usize),
    CpuSlider(usize),
    Other(u8),
}

impl Grab {
    pub fn from_byte(b: u8) -> Grab {
        match b {
            0..=3 => Grab::Coin(usize::from(b)),
            4..=7 => Grab::CpuSlider(usize::from(b - 4)),
            other => Grab::Other(other),
        }
    }
    pub fn byte(self) -> u8 {
        match self {
            Grab::Coin(p) => p as u8,
            Grab::CpuSlider(p) => 4 + p as u8,
            Grab::Other(b) => b,
        }
    }
}

/// Each port's slot on the character-select screen (the decompilation's `CSSDoor`,
/// `mnCharSel_803F0DFC.doors[4]`), `SLOT_STRIDE` bytes apart. Offsets are from
/// [`SLOT`], the address Slippi's `SendMenuFrame.asm` reads the slot type at.
pub const SLOT: u32 = 0x803F_0E08;
pub const SLOT_STRIDE: u32 = 0x24;
/// What plays the port now (`p_kind`, u8, [`SlotType`]), one byte before [`SLOT`]. The
/// byte at [`SLOT`] itself is `p_kind_prev`, which the game copies from `p_kind` in the
/// same frame as every toggle; Slippi and libmelee read that one.
pub const SLOT_TYPE: i32 = -1;
/// `p_kind_prev` (u8): the slot type as Slippi reads it.
pub const SLOT_TYPE_PREV: i32 = 0;
/// The character whose icon the coin is down on (`sel_icon`, u8, icon order;
/// [`crate::melee::Character::icon`]); [`NO_ICON`] when none.
pub const SLOT_ICON: i32 = 2;
/// Non-zero while a hand holds this slot's CPU-level slider (`is_hold_cpu_slider`, u8).
pub const SLOT_HOLDING_SLIDER: i32 = 6;
/// `sel_icon` when no character is chosen (the ready check's `sel_icon >= 0x19`).
pub const NO_ICON: u8 = 0x19;

/// What plays a port (`p_kind`; libmelee `ControllerStatus`). The slot's toggle cycles
/// human -> CPU -> off -> human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotType {
    Human,
    Cpu,
    Off,
    Other(u8),
}

impl SlotType {
    pub fn from_byte(b: u8) -> SlotType {
        match b {
            0 => SlotType::Human,
            1 => SlotType::Cpu,
            3 => SlotType::Off,
            other => SlotType::Other(other),
        }
    }
    pub fn byte(self) -> u8 {
        match self {
            SlotType::Human => 0,
            SlotType::Cpu => 1,
            SlotType::Off => 3,
            SlotType::Other(b) => b,
        }
    }
}

/// A CPU port's level, 1..=9 (u8, `LEVEL_STRIDE` apart; Slippi's longer
/// `SendMenuFrame.asm`: 0x8048082F, 0853, 0877, 089B).
pub const CPU_LEVEL: u32 = 0x8048_082F;
pub const LEVEL_STRIDE: u32 = 0x24;

/// The "ready to fight" banner (u8): it swoops in from 10 (hidden) to 0 (shown); START
/// starts the match only at 0.
pub const READY_BANNER: u32 = 0x804D_6CF2;
pub const READY_SHOWN: u8 = 0;
pub const READY_HIDDEN: u8 = 10;

/// The stage-select cursor: follow the pointer at `SSS_ROOT`, then +0x10, then +0x28;
/// x and y are f32 at +0x38 and +0x3C there (today's Slippi; the older heap pointer
/// 0x80BDA810 moves between builds).
pub const SSS_ROOT: u32 = 0x804D_7820;
pub const SSS_CHAIN: [u32; 2] = [0x10, 0x28];
pub const SSS_X: u32 = 0x38;
pub const SSS_Y: u32 = 0x3C;

/// How close (cursor units) a hand must be to a character or stage (libmelee
/// `wiggleroom`), and to a toggle or the slider (libmelee's newer helper).
pub const WIGGLE: f32 = 1.5;
pub const WIGGLE_FINE: f32 = 1.0;

/// A port's HMN/CPU toggle (libmelee: x = -32.2 + 15.82 (port - 1), y = -2.2, ports
/// counted from 1).
pub fn toggle(port: usize) -> (f32, f32) {
    (-32.2 + 15.82 * port as f32, -2.2)
}

/// Where a CPU port's level slider token sits at `level` (1..=9): libmelee grabs it at
/// x = -30.9 + 15.4 (port - 1), y = -15.12 (the token at level 1); the token moves
/// right with the level by the offsets below (from a libmelee fork in the public code
/// corpus; to be confirmed on a disc).
pub fn slider_token(port: usize, level: u8) -> (f32, f32) {
    let i = usize::from(level.clamp(1, 9) - 1);
    (-30.9 + 15.4 * port as f32 + SLIDER_OFFSETS[i], -15.12)
}
const SLIDER_OFFSETS: [f32; 9] = [0.0, 0.746_401, 1.996_401, 3.483_204, 4.478_405, 5.971_207, 6.966_408, 8.459_207, 9.454_408];

/// Final Destination on the stage-select screen (libmelee `choose_stage`).
pub const FINAL_DESTINATION: (f32, f32) = (6.7, -9.0);

/// What the character-select screen shows for one port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortView {
    /// `None` while the hand pointer is null (not on this screen yet).
    pub hand: Option<(f32, f32)>,
    pub state: HandState,
    /// What the hand holds, while it grabs something.
    pub grab: Option<Grab>,
    pub slot: SlotType,
    /// The slot's chosen character, icon order ([`NO_ICON`]: none).
    pub icon: u8,
    pub cpu_level: u8,
    /// Some hand holds this slot's CPU-level slider.
    pub holding_slider: bool,
}

impl PortView {
    /// This slot's coin is down on `icon`: the game's own ready check (`sel_icon` set,
    /// its hand not grabbing; `mncharsel.c`), except that this port's hand holding the
    /// level slider still has its coin down.
    pub fn coin_down_on(&self, icon: u8) -> bool {
        self.icon == icon && !matches!(self.grab, Some(Grab::Coin(_)))
    }

    /// The hand grabs its own slot's CPU-level slider.
    pub fn holds_own_slider(&self, port: usize) -> bool {
        self.grab == Some(Grab::CpuSlider(port))
    }
}

/// A slot byte's address: `field` is one of the `SLOT_*` offsets.
pub fn slot_addr(port: usize, field: i32) -> u32 {
    (SLOT + SLOT_STRIDE * port as u32).wrapping_add_signed(field)
}
pub fn level_addr(port: usize) -> u32 {
    CPU_LEVEL + LEVEL_STRIDE * port as u32
}
pub fn hand_ptr_addr(port: usize) -> u32 {
    HAND_PTR + 4 * port as u32
}

/// Read one port's character-select state.
pub fn port(ram: RamView, port: usize) -> Result<PortView, RamError> {
    let p = ram.u32(hand_ptr_addr(port))?;
    let (hand, state, grab) = if is_mem1_pointer(p) {
        let state = HandState::from_byte(ram.u8(p + HAND_STATE)?);
        let grab = (state == HandState::Grabbing).then(|| ram.u8(p + HAND_GRAB).map(Grab::from_byte)).transpose()?;
        (Some((ram.f32(p + HAND_X)?, ram.f32(p + HAND_Y)?)), state, grab)
    } else {
        (None, HandState::Unplugged, None)
    };
    Ok(PortView {
        hand,
        state,
        grab,
        slot: SlotType::from_byte(ram.u8(slot_addr(port, SLOT_TYPE))?),
        icon: ram.u8(slot_addr(port, SLOT_ICON))?,
        cpu_level: ram.u8(level_addr(port))?,
        holding_slider: ram.u8(slot_addr(port, SLOT_HOLDING_SLIDER))? != 0,
    })
}

/// The stage-select cursor, `None` while the pointer chain is not set up.
pub fn stage_cursor(ram: RamView) -> Result<Option<(f32, f32)>, RamError> {
    let mut p = ram.u32(SSS_ROOT)?;
    for off in SSS_CHAIN {
        if !is_mem1_pointer(p) {
            return Ok(None);
        }
        p = ram.u32(p + off)?;
    }
    if !is_mem1_pointer(p) {
        return Ok(None);
    }
    Ok(Some((ram.f32(p + SSS_X)?, ram.f32(p + SSS_Y)?)))
}

/// The scene pair (major, minor).
pub fn scene(ram: RamView) -> Result<(u8, u8), RamError> {
    Ok((ram.u8(addr::SCENE)?, ram.menu()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_those_slippi_reads() {
        // SendMenuFrame.asm loads each port's bytes from these literal addresses.
        assert_eq!([0, 1, 2, 3].map(|p| slot_addr(p, SLOT_TYPE_PREV)), [0x803F0E08, 0x803F0E2C, 0x803F0E50, 0x803F0E74]);
        // The decompilation's `p_kind`, the byte before `p_kind_prev`.
        assert_eq!([0, 1, 2, 3].map(|p| slot_addr(p, SLOT_TYPE)), [0x803F0E07, 0x803F0E2B, 0x803F0E4F, 0x803F0E73]);
        assert_eq!([0, 1, 2, 3].map(|p| slot_addr(p, SLOT_ICON)), [0x803F0E0A, 0x803F0E2E, 0x803F0E52, 0x803F0E76]);
        assert_eq!([0, 1, 2, 3].map(|p| slot_addr(p, SLOT_HOLDING_SLIDER)), [0x803F0E0E, 0x803F0E32, 0x803F0E56, 0x803F0E7A]);
        assert_eq!([0, 1, 2, 3].map(level_addr), [0x8048082F, 0x80480853, 0x80480877, 0x8048089B]);
        assert_eq!([0, 1, 2, 3].map(hand_ptr_addr), [0x804A0BC0, 0x804A0BC4, 0x804A0BC8, 0x804A0BCC]);
        assert_eq!((READY_BANNER, main_menu::SUBMENU, main_menu::SELECTION), (0x804D6CF2, 0x804A04F0, 0x804A04F3));
        for b in 0..=12 {
            assert_eq!(Grab::from_byte(b).byte(), b);
        }
        assert_eq!((Grab::from_byte(2), Grab::from_byte(5)), (Grab::Coin(2), Grab::CpuSlider(1)));
        for b in 0..=4 {
            assert_eq!(HandState::from_byte(b).byte(), b);
            assert_eq!(SlotType::from_byte(b).byte(), b);
        }
    }

    #[test]
    fn geometry_is_libmelees() {
        assert_eq!(toggle(0), (-32.2, -2.2));
        assert!((toggle(3).0 - 15.26).abs() < 1e-4);
        assert_eq!(slider_token(0, 1), (-30.9, -15.12));
        assert!((slider_token(1, 9).0 - (-15.5 + 9.454_408)).abs() < 1e-4);
        assert!(SLIDER_OFFSETS.windows(2).all(|w| w[1] > w[0]), "the token moves right as the level rises");
    }

    #[test]
    fn the_stage_cursor_follows_the_static_chain_and_a_broken_one_is_none() {
        let mut mem = vec![0u8; addr::MEM1_SIZE];
        let mut w = crate::ram::RamMut::mem1(&mut mem);
        w.set_u32(SSS_ROOT, 0x8070_0000).unwrap();
        w.set_u32(0x8070_0010, 0x8070_1000).unwrap();
        w.set_u32(0x8070_1028, 0x8070_2000).unwrap();
        w.set_f32(0x8070_2038, 6.5).unwrap();
        w.set_f32(0x8070_203C, -9.0).unwrap();
        assert_eq!(stage_cursor(RamView::mem1(&mem)).unwrap(), Some((6.5, -9.0)));
        crate::ram::RamMut::mem1(&mut mem).set_u32(0x8070_0010, 0xDEAD_BEEF).unwrap();
        assert_eq!(stage_cursor(RamView::mem1(&mem)).unwrap(), None);
    }
}
