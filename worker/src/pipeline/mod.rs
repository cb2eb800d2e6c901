//! The training pipeline: the games played, their decisions made into transitions, the
//! transitions into batches, the batches onto disk and to the manager.
//!
//! ```text
//! envs (K threads) ─► actor (one forward pass per round, epsilon-greedy) ─► nstep ─► batcher
//!                                                                             │ RawBatch
//!                                   uploader: encode + zstd ─► spool (disk) ─► POST experience
//! ```
//! - [`actor`]: the environment loop: K environments, one forward pass per round,
//!   epsilon-greedy, episode reports, model swaps.
//! - [`envs`]: each environment on its own thread, and the commands it takes.
//! - [`tuner`]: `--envs auto`, the search for the count of environments.
//! - [`nstep`]: decisions into n-step transitions (the 57-float rows).
//! - [`batcher`]: transitions into batches of one model version.
//! - [`uploader`]: spooling and delivering batches exactly once, with retries.
//! - [`spool`]: the bounded on-disk queue of unsent batches.
//! - [`shared`]: the identity and counters the run's thread and tasks share.
//! - [`live`]: the dashboard's live view: env 0 paced to 60 fps and streamed while watched.
//! - [`selfplay`]: self-play's opponents: the opponent run's models, and each episode's
//!   draw among them and the CPU (their transitions go through a second batcher and
//!   uploader of the same kinds).

pub mod actor;
pub mod batcher;
pub mod envs;
pub mod live;
pub mod nstep;
pub mod selfplay;
pub mod shared;
pub mod spool;
pub mod tuner;
pub mod uploader;
