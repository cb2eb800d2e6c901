//! `shine-worker` as a library: the actor that plays and uploads, and local play.
//!
//! Data flow of `run` (see [`run`] for the tasks and shutdown):
//! ```text
//! manager ─registration, model─► run ─► actor (K envs, batched inference, n-step)
//!                                         │ RawBatch
//!                                         ▼
//!                         uploader: encode + zstd ─► spool (disk) ─► POST /api/v1/experience
//! ```
//! - [`run`]: `shine-worker run`: settings (flags, environment, config file), the
//!   tasks that talk to the manager, shutdown.
//! - [`actor`]: the environment loop: K environments, one forward pass per round,
//!   epsilon-greedy, n-step transitions, episode reports, model swaps.
//! - [`uploader`]: spooling and delivering batches exactly once, with retries.
//! - [`spool`]: the bounded on-disk queue of unsent batches.
//! - [`client`]: the typed HTTP client for `docs/api.md`.
//! - [`live`]: the dashboard's live view: env 0 paced to 60 fps and streamed while watched.
//! - [`backend`]: where the game runs (simulator or Dolphin), shared by `run` and `play`.
//! - [`play`]: `play` and `eval`: local episodes with a built-in policy or a model, on
//!   the simulator or in Dolphin.
//! - [`doctor`]: `doctor`: checks a Dolphin setup and says what to fix.

pub mod actor;
pub mod backend;
pub mod client;
pub mod doctor;
pub mod live;
pub mod play;
pub mod run;
pub mod spool;
pub mod uploader;
