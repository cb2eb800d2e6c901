//! `shine-worker` as a library: the actor that plays and uploads, and local play.
//!
//! Data flow of `run` (see [`run`] for the tasks and shutdown):
//! ```text
//! manager ─registration, model─► run ─► actor (K envs, batched inference, n-step)
//!                                         │ RawBatch
//!                                         ▼
//!                         uploader: encode + zstd ─► spool (disk) ─► POST /api/v1/experience
//! ```
//! - [`run`]: `shine-worker run`: starts the tasks below and stops them (the one
//!   shutdown pattern of `shine_agent::shutdown`: a token, tasks joined, not aborted).
//! - [`settings`]: its flags, environment variables and config file, as one struct.
//! - [`shared`]: the identity and counters the run's thread and tasks share.
//! - [`control`]: registration retries, model polls, heartbeats, episode reports.
//! - [`actor`]: the environment loop: K environments, one forward pass per round,
//!   epsilon-greedy, episode reports, model swaps.
//! - [`envs`]: each environment on its own thread, and the commands it takes.
//! - [`tuner`]: `--envs auto`, the search for the count of environments.
//! - [`nstep`]: decisions into n-step transitions (the 57-float rows).
//! - [`batcher`]: transitions into batches of one model version.
//! - [`uploader`]: spooling and delivering batches exactly once, with retries.
//! - [`spool`]: the bounded on-disk queue of unsent batches.
//! - [`client`]: the typed HTTP client for `docs/api.md` (messages: `shine_agent::protocol`).
//! - [`live`]: the dashboard's live view: env 0 paced to 60 fps and streamed while watched.
//! - [`backend`]: where the game runs (simulator or Dolphin), shared by `run` and `play`.
//! - [`play`]: `play` and `eval`: local episodes with a built-in policy or a model, on
//!   the simulator or in Dolphin.
//! - [`versus`]: `play --human-port`: a person against the bot in Dolphin.
//! - [`duel`]: the simulator with the bot on either side and a policy or the CPU on
//!   the other.
//! - [`league`]: the league matches the manager hands out, a small share of the time.
//! - [`selfplay`]: self-play's opponents: the opponent run's models, and each
//!   episode's draw among them and the CPU.
//! - [`doctor`]: `doctor`: checks a Dolphin setup and says what to fix.

#![deny(unsafe_code)]

pub mod actor;
pub mod backend;
pub mod batcher;
pub mod client;
pub mod control;
pub mod doctor;
pub mod duel;
pub mod envs;
pub mod league;
pub mod live;
pub mod nstep;
pub mod play;
pub mod run;
pub mod selfplay;
pub mod settings;
pub mod shared;
pub mod spool;
pub mod tuner;
pub mod uploader;
pub mod versus;
