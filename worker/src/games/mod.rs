//! Games and seats: where the game runs, who sits where, and the matches played there.
//! Every side a policy plays sits in a `shine_agent::Seat` (a pad a frame).
//!
//! - [`backend`]: where the game runs (the simulator or Dolphin), shared by `run` and
//!   `play`.
//! - [`duel`]: the simulator with the bot on either side and a policy ([`duel::Rival`])
//!   or the CPU on the other ([`duel::Seats`]: who plays the other side).
//! - [`matches`](mod@matches): the match engine: episodes on the simulator against the CPU or a
//!   rival, as `play`, `eval` and the league's matches play them.
//! - [`versus`]: `play --human-port`: a person against the bot in Dolphin.

pub mod backend;
pub mod duel;
pub mod matches;
pub mod versus;
