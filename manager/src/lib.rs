//! `shine-manager`: the learner service.
//!
//! Data flow of an experience upload, and of everything it feeds:
//! ```text
//! worker ─POST /api/v1/experience─► api::experience: check; room in the queue, from the header (else 503);
//!                                     │ dedup; decode + validate (blocking pool); wal::Wal::append (durable) ─► 202
//!                                     │ trainer::Reservation::ingest (the queue, bounded in transitions)
//!                                     ▼  device thread (one for every run; owns everything below)
//!   replay::Replay (ring on the device, or the in-RAM baseline)
//!                                     │ sample [batch, 57] on the device (uniform or by priority;
//!                                     │ a prioritized step's TD errors become the rows' new priorities)
//!                                     ▼
//!   shine_agent::dqn::Learner::train_step ─► publish every N steps ─► registry (models on disk)
//!                                     │                                   └─► GET /api/v1/models/...
//!                                     └─► checkpoint (atomic, every M steps and on shutdown)
//! sampler (every interval) ─► stats (time series), metrics ─► GET /api/v1/stats, /metrics
//! ```
//! Learner core:
//! - [`replay`]: the in-GPU replay and the in-RAM baseline; [`prioritized`]: their
//!   proportional prioritized sampling, on the replay's device.
//! - [`device`]: the one thread that trains every run, in turn.
//! - [`trainer`]: one run's trainer, its rate limiter and its client.
//! - [`checkpoint`]: atomic save and restore of the learner and counters.
//! - [`priority`]: the trainer thread's scheduling priority (the one module here allowed `unsafe`).
//! - [`wal`]: the write-ahead log of accepted uploads; a restart rebuilds the replay
//!   and the seen upload ids from it.
//! - [`bench`]: the paper's Table 1 and Figure 3 in one run.
//!
//! Service:
//! - [`server`]: start-up and the one shutdown pattern (`shine_agent::shutdown`).
//! - [`api`]: the HTTP API (axum router, one module per route group); [`error`]: its
//!   one error enum; [`state`]: the one state struct the handlers share.
//! - [`config`]: the TOML file and the CLI.
//! - [`fleet`]: the worker registry and the epsilon ladder.
//! - [`run`]: a run (an experiment: its settings, replay, learner, models, data).
//! - [`stats`]: the dashboard's time series; [`sampler`]: takes its samples;
//!   [`history`]: each run's series, episodes and evaluations in SQLite, across restarts;
//!   [`metrics`]: Prometheus, with the same words (accepted, inserted, sampled, trained).
//! - [`live`]: live matches, worker frames fanned out to browsers.
//! - [`registry`]: published models on disk.
//! - [`launch`]: `shine-manager launch-script`, the `configs/` files for a worker fleet.
//!
//! The JSON messages and the upload format the API speaks are defined once, in
//! `shine_agent::protocol` and `shine_agent::experience`.

#![deny(unsafe_code)]

pub mod bench;
pub mod checkpoint;
pub mod device;
pub mod prioritized;
pub mod priority;
pub mod replay;
pub mod trainer;
pub mod wal;

pub mod api;
pub mod config;
pub mod error;
pub mod fleet;
pub mod history;
pub mod launch;
pub mod live;
pub mod metrics;
pub mod registry;
pub mod run;
pub mod sampler;
pub mod server;
pub mod state;
pub mod stats;
pub use server::{run, serve};
