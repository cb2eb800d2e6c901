//! `shine-worker` as a library: the actor that plays and uploads, and local play.
//!
//! Data flow of `run` (see [`run`] for the tasks and shutdown):
//! ```text
//! manager ─registration, model─► run ─► actor (K envs, batched inference, n-step)
//!                                         │ RawBatch
//!                                         ▼
//!                         uploader: encode + zstd ─► spool (disk) ─► POST /api/v1/experience
//! ```
//! Its parts, in folders:
//! - [`run`](mod@run): `shine-worker run`: starts the tasks and stops them (the one
//!   shutdown pattern of `shine_agent::shutdown`: a token, tasks joined, not aborted);
//!   its flags and config (`run::settings`), registration, model polls, heartbeats and
//!   episode reports (`run::control`), the league matches the manager hands out
//!   (`run::league`).
//! - [`pipeline`]: the training pipeline: the actor and its environments, n-step
//!   transitions, batches, the spool and the uploader, the live view, self-play's
//!   opponents.
//! - [`games`]: where the game runs (`games::backend`: simulator or Dolphin), the seats
//!   (`games::duel`), the match engine of `play`, `eval` and the league
//!   (`games::matches`), a person against the bot in Dolphin (`games::versus`).
//! - [`client`]: the typed HTTP client for `docs/api.md` (messages: `shine_agent::protocol`).
//! - [`play`]: `play` and `eval`: local episodes with a built-in policy or a model, on
//!   the simulator or in Dolphin.
//! - [`doctor`]: `doctor`: checks a Dolphin setup and says what to fix.

#![deny(unsafe_code)]

pub mod client;
pub mod doctor;
pub mod games;
pub mod pipeline;
pub mod play;
pub mod run;
