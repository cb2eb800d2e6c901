//! `shine-manager`: the learner service.
//!
//! Five layers, each calling only the ones below it (`checks/tests/layers.rs` holds them to it):
//!
//! 1. [`api`]: HTTP only. Extract, call the run layer, map its errors ([`error`]); a
//!    handler never decides anything about a run.
//! 2. [`run`](mod@run): a run's operations. [`run::Run::accept`] takes an upload durably (the
//!    steps, their order and the race between two copies of one upload are explained
//!    there); pause and resume; [`run::Runs`] creates and deletes runs; a run's files.
//! 3. [`device`]: the one thread that owns the training device, its scheduler, the
//!    groups of runs it steps (`device::group`: every run in one, alone a group of
//!    one), the messages it takes and each run's handle on it (the queue an upload
//!    waits in).
//! 4. [`trainer`]: one run's learner, a plain struct (no thread, no channel): its
//!    config, rate limiter, ingest, publishing, checkpoints; the step of a group of runs
//!    (`trainer::step`, captured once as a CUDA graph where it can be:
//!    `trainer::graph`, `trainer::cuda_graph`); and `trainer::bench` (the paper's Table
//!    1 and Figure 3 in one run, and the grouped step's table).
//! 5. [`storage`]: what the learner keeps: `storage::replay` (in-GPU replay and the
//!    in-RAM baseline) with `storage::prioritized`; `storage::registry` (published
//!    models on disk); `storage::checkpoint`; `storage::wal` (the write-ahead log of
//!    accepted uploads). And `shine_agent::dqn` (the Dueling DQN).
//!
//! One upload, top to bottom:
//! ```text
//! api::experience   token, content type, the run taking uploads, size; read the body
//!   run::Run::accept  header; a repeat?; reserve room in the queue (from the header:
//!                     503 busy before any decompression); decode + validate (blocking
//!                     pool); storage::wal::Wal::append (durable, group commit); queue it  -> 202
//!     device::RunHandle  the run's queue, bounded in transitions
//!       device thread    the run's turn: its queued uploads in (as far as its rate
//!                        limiter takes them), then one step of its group if it may
//!         trainer::RunTrainer::ingest      storage::replay::Replay::push (rows of 64
//!                                          floats, on the device)
//!         device::TrainGroup::step         trainer::GroupStep: each member's draw from
//!                                          its replay, one shine_agent::dqn::Group step
//!         trainer::RunTrainer::grouped_step_taken  each member that moved: registry
//!                                          (publish every N steps), checkpoint (every M
//!                                          steps, on removal, at a graceful stop)
//! ```
//! Nothing calls back up: the device layer copies the trainer's numbers out to the
//! run's handle, where the layers above read them; models reach the registry through
//! the publish callback the run layer gave the trainer.
//!
//! Beside the layers, the service: [`server`] (start-up and the one shutdown pattern,
//! `shine_agent::shutdown`), [`app_state`] (the one state struct the handlers share),
//! [`config`] (the TOML file and the CLI), [`fleet`] (the worker registry and the
//! epsilon ladder), [`dashboard`] (what the dashboard reads: the JSON views, the time
//! series and their sampler, live matches fanned out to browsers), [`history`] (each
//! run's series, episodes and evaluations in SQLite, across restarts), [`league`]
//! (every kept model of every run rated from matches against each other), [`metrics`]
//! (Prometheus, with the same words: accepted, inserted, sampled, trained), [`play`] (a person against a model in the
//! browser, on the simulator, on a thread of its own), [`launch`] (`shine-manager launch-script`),
//! [`nice`] (the device thread's scheduling priority, its nice value: with
//! `trainer::cuda_graph`'s FFI, the modules here allowed `unsafe`).
//!
//! The JSON messages and the upload format the API speaks are defined once, in
//! `shine_agent::protocol` and `shine_agent::experience`.

#![deny(unsafe_code)]

pub mod device;
pub mod nice;
pub mod storage;
pub mod trainer;

pub mod api;
pub mod app_state;
pub mod config;
pub mod error;
pub mod fleet;
pub mod history;
pub mod dashboard;
pub mod league;
pub mod launch;
pub mod play;
pub mod metrics;
pub mod run;
pub mod server;
pub use server::{run, serve};
