//! `shine-bridge`: the boundary between Shine and the game.
//!
//! Layout and data flow:
//! - [`ram`]: Melee's RAM layout (NTSC 1.02) as a typed big-endian view over bytes;
//!   the only place an address is spelled.
//! - [`melee`]: Melee's own ids (action states, characters).
//! - [`pad`]: one frame's controller state and Dolphin's named-pipe protocol.
//! - [`emulator`]: the [`Emulator`] trait every backend implements: step a frame with
//!   a [`Pad`], then read the [`RamView`] that frame produced.
//! - [`dolphin`]: the real emulator: user folder, launch, guest RAM by mmap, the pad
//!   by pipe, the frame tick, menu navigation; plus the DOL format and the probe.
//! - [`sim`]: the embedded Melee-like simulator; it writes the real RAM layout every
//!   frame, so the worker reads it with the same code that reads Dolphin.
//!
//! ```text
//!   Pad ──► Emulator::step ──► RAM (big-endian, real addresses) ──► RamView ──► agent
//! ```

#![deny(unsafe_code)]

pub mod dolphin;
pub mod emulator;
pub mod melee;
pub mod pad;
pub mod ram;
pub mod sim;

pub use emulator::{Emulator, MatchSetup};
pub use pad::{Button, Pad, Stick};
pub use ram::{RamImage, RamView};
