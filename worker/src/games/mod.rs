//! Games and seats: where the game runs and who sits where.
//!
//! - [`backend`]: where the game runs (the simulator or Dolphin), shared by `run` and
//!   `play`.
//! - [`duel`]: the simulator with the bot on either side and a policy or the CPU on the
//!   other ([`duel::Seats`]: who plays the other side).
//! - [`versus`]: `play --human-port`: a person against the bot in Dolphin.

pub mod backend;
pub mod duel;
pub mod versus;
