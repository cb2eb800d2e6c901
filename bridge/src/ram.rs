//! A typed, big-endian view of Melee's RAM (NTSC 1.02).
//!
//! The address table lives in [`addr`], [`static_player`] and [`fighter`]; nothing
//! else in the project spells an in-game address (the menus' are in
//! `dolphin/css.rs`). `docs/dolphin.md`, "Where every address, id and coordinate
//! comes from", names the sources of the frame counter and scene bytes and says whose
//! the fighter offsets are. Reads go through checked accessors that return
//! [`RamError`] instead of panicking, because the bytes may come from a live emulator
//! we do not control (a fighter pointer can be garbage outside a match).
//!
//! A view covers a *window* of MEM1: Dolphin's mapping is the whole of MEM1 (base
//! `0x8000_0000`), while the embedded simulator keeps only the window that holds the
//! fields it writes ([`SIM_WINDOW`]), which keeps one environment's RAM image small.

use thiserror::Error;

/// Global addresses.
pub mod addr {
    /// First byte of MEM1; game address `A` lives at byte `A - MEM1_BASE` of a full view.
    pub const MEM1_BASE: u32 = 0x8000_0000;
    /// Bytes of real MEM1 (24 MiB).
    pub const MEM1_SIZE: usize = 0x0180_0000;
    /// Global frame counter, u32.
    pub const FRAME_COUNTER: u32 = 0x8047_9D60;
    /// Scene bytes: current major, pending major, previous major, current minor.
    pub const SCENE: u32 = 0x8047_9D30;
    /// "Menu" byte: 0 character select, 1 stage select, 2 in game, 4 post-game.
    pub const MENU: u32 = 0x8047_9D33;
    /// Pad state the game reads for port 0; ports are [`PAD_STRIDE`] apart.
    pub const PAD_BASE: u32 = 0x804C_1FAC;
    pub const PAD_STRIDE: u32 = 0x44;
    /// Static player block of port 0; ports are [`STATIC_PLAYER_STRIDE`] apart.
    pub const STATIC_PLAYER_BASE: u32 = 0x8045_3080;
    pub const STATIC_PLAYER_STRIDE: u32 = 0xE90;
}

/// Offsets inside the per-port pad block at [`addr::PAD_BASE`].
pub mod pad_block {
    pub const BUTTONS: u32 = 0x00; // u32
    pub const MAIN_X: u32 = 0x20; // f32, -1..1
    pub const MAIN_Y: u32 = 0x24;
    pub const C_X: u32 = 0x28;
    pub const C_Y: u32 = 0x2C;
    pub const L_ANALOG: u32 = 0x30; // f32, 0..1
    pub const R_ANALOG: u32 = 0x34;
}

/// Offsets inside the static player block.
pub mod static_player {
    pub const CHARACTER: u32 = 0x04; // u32, CSS id
    pub const SLOT_TYPE: u32 = 0x08; // u32, who plays the port: 0 human, 1 CPU, 3 none
    pub const X: u32 = 0x10; // f32
    pub const Y: u32 = 0x14; // f32
    pub const PERCENT: u32 = 0x60; // u16, displayed percent
    pub const STOCKS: u32 = 0x8E; // u8
    pub const FIGHTER_PTR: u32 = 0xB0; // u32
}

/// Offsets inside fighter data (at the fighter pointer).
pub mod fighter {
    pub const INTERNAL_CHARACTER: u32 = 0x64; // u32
    pub const ACTION_STATE: u32 = 0x70; // u32
    pub const FACING: u32 = 0x8C; // f32, +1 right / -1 left
    pub const SELF_AIR_VX: u32 = 0xE0; // f32
    pub const SELF_VY: u32 = 0xE4; // f32
    pub const ATTACK_VX: u32 = 0xEC; // f32
    pub const ATTACK_VY: u32 = 0xF0; // f32
    pub const X: u32 = 0x110; // f32
    pub const Y: u32 = 0x114; // f32
    pub const IN_AIR: u32 = 0x140; // u32, 0 ground / 1 air
    pub const SELF_GROUND_VX: u32 = 0x14C; // f32
    pub const ACTION_FRAME: u32 = 0x8F4; // f32
    pub const PERCENT: u32 = 0x1890; // f32
    pub const HITLAG_LEFT: u32 = 0x19BC; // f32
    pub const JUMPS_USED: u32 = 0x19C8; // u8
    pub const INVULNERABLE: u32 = 0x19EC; // u32
    pub const SHIELD_SIZE: u32 = 0x19F8; // f32, 0..60
    pub const CHARGING_SMASH: u32 = 0x2174; // u32, bit 0x2
    pub const HITSTUN_LEFT: u32 = 0x23A0; // f32
    /// Bytes of fighter data that Shine touches (last field + 4).
    pub const SIZE: u32 = 0x23A4;
}

/// The part of MEM1 the embedded simulator keeps: from the static player blocks to
/// just past its two fighter blocks (see [`SIM_FIGHTER_DATA`]). About 560 KiB.
pub const SIM_WINDOW: std::ops::Range<u32> = 0x8045_3000..0x804E_0000;
/// Where the simulator places fighter data for ports 0 and 1. Real Melee keeps it on
/// the heap; any address in MEM1 passes the pointer check, so these sit in the window.
pub const SIM_FIGHTER_DATA: [u32; 2] = [0x804D_8000, 0x804D_C000];

/// A checked read or write that fell outside the view.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RamError {
    #[error("address {addr:#010x} (+{len} bytes) is outside the RAM view {start:#010x}..{end:#010x}")]
    OutOfRange { addr: u32, len: usize, start: u32, end: u64 },
    #[error("port {0} is out of range (0..=3)")]
    BadPort(usize),
}

/// True when `ptr` points into real MEM1: the check a fighter pointer must pass before
/// it is followed (outside a match it may be null or garbage).
pub fn is_mem1_pointer(ptr: u32) -> bool {
    (addr::MEM1_BASE..addr::MEM1_BASE + addr::MEM1_SIZE as u32).contains(&ptr)
}

fn locate(base: u32, len: usize, addr: u32, n: usize) -> Result<usize, RamError> {
    let off = addr.wrapping_sub(base) as usize;
    if addr >= base && off.checked_add(n).is_some_and(|e| e <= len) {
        Ok(off)
    } else {
        Err(RamError::OutOfRange { addr, len: n, start: base, end: base as u64 + len as u64 })
    }
}

/// Read-only, big-endian view of a window of Melee's RAM.
#[derive(Clone, Copy)]
pub struct RamView<'a> {
    base: u32,
    bytes: &'a [u8],
}

macro_rules! be_reader {
    ($name:ident, $t:ty) => {
        pub fn $name(&self, addr: u32) -> Result<$t, RamError> {
            const N: usize = std::mem::size_of::<$t>();
            let off = locate(self.base, self.bytes.len(), addr, N)?;
            let mut b = [0u8; N];
            b.copy_from_slice(&self.bytes[off..off + N]);
            Ok(<$t>::from_be_bytes(b))
        }
    };
}

impl<'a> RamView<'a> {
    /// A view of the whole of MEM1 (as Dolphin maps it): byte 0 is `0x8000_0000`.
    pub fn mem1(bytes: &'a [u8]) -> Self {
        Self { base: addr::MEM1_BASE, bytes }
    }
    /// A view whose first byte is game address `base`.
    pub fn with_base(base: u32, bytes: &'a [u8]) -> Self {
        Self { base, bytes }
    }
    pub fn base(&self) -> u32 {
        self.base
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    be_reader!(u8, u8);
    be_reader!(u16, u16);
    be_reader!(u32, u32);
    pub fn f32(&self, addr: u32) -> Result<f32, RamError> {
        self.u32(addr).map(f32::from_bits)
    }

    pub fn frame_counter(&self) -> Result<u32, RamError> {
        self.u32(addr::FRAME_COUNTER)
    }
    pub fn menu(&self) -> Result<u8, RamError> {
        self.u8(addr::MENU)
    }
    /// The static player block of `port` (0..=3).
    pub fn player(&self, port: usize) -> Result<PlayerView<'a>, RamError> {
        if port > 3 {
            return Err(RamError::BadPort(port));
        }
        Ok(PlayerView { ram: *self, base: static_block(port) })
    }
}

/// Game address of the static player block of `port`.
pub fn static_block(port: usize) -> u32 {
    addr::STATIC_PLAYER_BASE + addr::STATIC_PLAYER_STRIDE * port as u32
}
/// Game address of the pad block the game reads for `port`.
pub fn pad_block_addr(port: usize) -> u32 {
    addr::PAD_BASE + addr::PAD_STRIDE * port as u32
}

/// One port's static player block.
#[derive(Clone, Copy)]
pub struct PlayerView<'a> {
    ram: RamView<'a>,
    base: u32,
}

impl<'a> PlayerView<'a> {
    pub fn character(&self) -> Result<u32, RamError> {
        self.ram.u32(self.base + static_player::CHARACTER)
    }
    /// Who plays this port in the match: 0 a person (HMN), 1 Melee's CPU, 3 nobody.
    pub fn slot_type(&self) -> Result<u32, RamError> {
        self.ram.u32(self.base + static_player::SLOT_TYPE)
    }
    pub fn x(&self) -> Result<f32, RamError> {
        self.ram.f32(self.base + static_player::X)
    }
    pub fn y(&self) -> Result<f32, RamError> {
        self.ram.f32(self.base + static_player::Y)
    }
    pub fn percent(&self) -> Result<u16, RamError> {
        self.ram.u16(self.base + static_player::PERCENT)
    }
    pub fn stocks(&self) -> Result<u8, RamError> {
        self.ram.u8(self.base + static_player::STOCKS)
    }
    pub fn fighter_ptr(&self) -> Result<u32, RamError> {
        self.ram.u32(self.base + static_player::FIGHTER_PTR)
    }
    /// The fighter data, or `None` outside a match (null or garbage pointer).
    pub fn fighter(&self) -> Result<Option<FighterView<'a>>, RamError> {
        let ptr = self.fighter_ptr()?;
        Ok(is_mem1_pointer(ptr).then_some(FighterView { ram: self.ram, base: ptr }))
    }
}

/// One fighter's data block.
#[derive(Clone, Copy)]
pub struct FighterView<'a> {
    ram: RamView<'a>,
    base: u32,
}

macro_rules! fighter_field {
    ($name:ident, $read:ident, $t:ty, $off:expr) => {
        pub fn $name(&self) -> Result<$t, RamError> {
            self.ram.$read(self.base + $off)
        }
    };
}

impl FighterView<'_> {
    pub fn addr(&self) -> u32 {
        self.base
    }
    fighter_field!(internal_character, u32, u32, fighter::INTERNAL_CHARACTER);
    fighter_field!(action_state, u32, u32, fighter::ACTION_STATE);
    fighter_field!(facing, f32, f32, fighter::FACING);
    fighter_field!(self_air_vx, f32, f32, fighter::SELF_AIR_VX);
    fighter_field!(self_vy, f32, f32, fighter::SELF_VY);
    fighter_field!(attack_vx, f32, f32, fighter::ATTACK_VX);
    fighter_field!(attack_vy, f32, f32, fighter::ATTACK_VY);
    fighter_field!(x, f32, f32, fighter::X);
    fighter_field!(y, f32, f32, fighter::Y);
    fighter_field!(in_air, u32, u32, fighter::IN_AIR);
    fighter_field!(self_ground_vx, f32, f32, fighter::SELF_GROUND_VX);
    fighter_field!(action_frame, f32, f32, fighter::ACTION_FRAME);
    fighter_field!(percent, f32, f32, fighter::PERCENT);
    fighter_field!(hitlag_left, f32, f32, fighter::HITLAG_LEFT);
    fighter_field!(jumps_used, u8, u8, fighter::JUMPS_USED);
    fighter_field!(invulnerable, u32, u32, fighter::INVULNERABLE);
    fighter_field!(shield_size, f32, f32, fighter::SHIELD_SIZE);
    fighter_field!(charging_smash, u32, u32, fighter::CHARGING_SMASH);
    fighter_field!(hitstun_left, f32, f32, fighter::HITSTUN_LEFT);
}

/// Writable big-endian view, used by the simulator and by tests that build RAM images.
pub struct RamMut<'a> {
    base: u32,
    bytes: &'a mut [u8],
}

macro_rules! be_writer {
    ($name:ident, $t:ty) => {
        pub fn $name(&mut self, addr: u32, v: $t) -> Result<(), RamError> {
            const N: usize = std::mem::size_of::<$t>();
            let off = locate(self.base, self.bytes.len(), addr, N)?;
            self.bytes[off..off + N].copy_from_slice(&v.to_be_bytes());
            Ok(())
        }
    };
}

impl<'a> RamMut<'a> {
    pub fn mem1(bytes: &'a mut [u8]) -> Self {
        Self { base: addr::MEM1_BASE, bytes }
    }
    pub fn with_base(base: u32, bytes: &'a mut [u8]) -> Self {
        Self { base, bytes }
    }
    pub fn view(&self) -> RamView<'_> {
        RamView { base: self.base, bytes: self.bytes }
    }
    be_writer!(set_u8, u8);
    be_writer!(set_u16, u16);
    be_writer!(set_u32, u32);
    pub fn set_f32(&mut self, addr: u32, v: f32) -> Result<(), RamError> {
        self.set_u32(addr, v.to_bits())
    }
}

/// An owned RAM image covering a window of MEM1; what the simulator writes each frame.
#[derive(Clone, PartialEq, Eq)]
pub struct RamImage {
    base: u32,
    bytes: Vec<u8>,
}

impl RamImage {
    /// A zeroed image of `range` (game addresses).
    pub fn new(range: std::ops::Range<u32>) -> Self {
        Self { base: range.start, bytes: vec![0; (range.end - range.start) as usize] }
    }
    /// A zeroed image of the simulator's window.
    pub fn sim() -> Self {
        Self::new(SIM_WINDOW)
    }
    pub fn view(&self) -> RamView<'_> {
        RamView::with_base(self.base, &self.bytes)
    }
    pub fn writer(&mut self) -> RamMut<'_> {
        RamMut::with_base(self.base, &mut self.bytes)
    }
    pub fn base(&self) -> u32 {
        self.base
    }
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for RamImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RamImage({:#010x}, {} bytes)", self.base, self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_big_endian_at_real_addresses() {
        let mut img = RamImage::sim();
        img.writer().set_u32(0x8000_0000, 0).unwrap_err(); // outside the sim window
        let mut full = vec![0u8; addr::MEM1_SIZE];
        let off = (addr::FRAME_COUNTER - addr::MEM1_BASE) as usize;
        full[off..off + 4].copy_from_slice(&[0x00, 0x01, 0x02, 0x03]);
        assert_eq!(RamView::mem1(&full).frame_counter().unwrap(), 0x0001_0203);
    }

    #[test]
    fn out_of_range_is_an_error_not_a_panic() {
        let bytes = [0u8; 16];
        let v = RamView::with_base(0x8000_0000, &bytes);
        assert_eq!(v.u32(0x8000_000C).unwrap(), 0);
        assert!(matches!(v.u32(0x8000_000D), Err(RamError::OutOfRange { .. })));
        assert!(v.u8(0x7FFF_FFFF).is_err());
        assert!(v.u32(u32::MAX).is_err());
        assert!(v.player(4).is_err());
    }

    #[test]
    fn fighter_pointer_is_range_checked() {
        let mut img = RamImage::sim();
        let p = static_block(1);
        for garbage in [0u32, 0x7FFF_FFFF, 0x8180_0000, 0xDEAD_BEEF] {
            img.writer().set_u32(p + static_player::FIGHTER_PTR, garbage).unwrap();
            assert!(img.view().player(1).unwrap().fighter().unwrap().is_none(), "{garbage:#x}");
        }
        let e = SIM_FIGHTER_DATA[1];
        let mut w = img.writer();
        w.set_u32(p + static_player::FIGHTER_PTR, e).unwrap();
        w.set_u32(e + fighter::ACTION_STATE, 0x0E).unwrap();
        w.set_f32(e + fighter::SHIELD_SIZE, 42.5).unwrap();
        let f = img.view().player(1).unwrap().fighter().unwrap().unwrap();
        assert_eq!(f.action_state().unwrap(), 0x0E);
        assert_eq!(f.shield_size().unwrap(), 42.5);
        // The raw bytes really are big-endian.
        let off = (e + fighter::ACTION_STATE - SIM_WINDOW.start) as usize;
        assert_eq!(&img.bytes()[off..off + 4], &[0, 0, 0, 0x0E]);
    }

    #[test]
    fn sim_fighter_blocks_fit_the_window() {
        for e in SIM_FIGHTER_DATA {
            assert!(SIM_WINDOW.contains(&e) && e + fighter::SIZE <= SIM_WINDOW.end);
        }
        assert!(static_block(3) + addr::STATIC_PLAYER_STRIDE <= SIM_FIGHTER_DATA[0]);
    }
}
