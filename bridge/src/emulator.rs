//! The one interface every backend offers the worker: step a frame with the bot's pad,
//! then read the RAM that frame produced. The embedded simulator and Dolphin both
//! implement it, so the state is always read by the same code from the same layout.

use crate::pad::Pad;
use crate::ram::RamView;

/// Which ports a match uses and how strong the CPU is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchSetup {
    /// The bot's port (0-based; the paper's agent is on port 2, i.e. index 1).
    pub agent_port: usize,
    /// The CPU opponent's port (the paper: port 1, index 0).
    pub opponent_port: usize,
    /// CPU level 1..=9.
    pub cpu_level: u8,
    /// Stocks each player starts with.
    pub stocks: u8,
}

impl Default for MatchSetup {
    fn default() -> Self {
        MatchSetup { agent_port: 1, opponent_port: 0, cpu_level: 9, stocks: 4 }
    }
}

/// A running game that advances one frame at a time.
pub trait Emulator {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Start a fresh match (a new episode); `seed` makes the simulator reproducible.
    fn reset(&mut self, setup: MatchSetup, seed: u64) -> Result<(), Self::Error>;
    /// Hold `pad` on the agent's port for one frame and advance the game one frame.
    fn step(&mut self, pad: &Pad) -> Result<(), Self::Error>;
    /// The RAM as it stands after the last frame.
    fn ram(&self) -> RamView<'_>;
    /// The match in progress.
    fn setup(&self) -> MatchSetup;
    /// Frames the backend advanced without a pad from us (always 0 for the simulator).
    fn skipped_frames(&self) -> u64 {
        0
    }
}
