//! `shine-manager`: the learner service.
//!
//! Learner core (data flow):
//! ```text
//! HTTP ingest ─ trainer::TrainerHandle::try_ingest (bounded queue; full = 503)
//!                 │
//!                 ▼  trainer thread (owns everything below)
//!   replay::Replay (ring on the device, or the in-RAM baseline)
//!                 │ sample [batch, 57] on the device
//!                 ▼
//!   shine_agent::dqn::Learner::train_step ─► publish model every N steps ─► registry
//!                 │
//!                 └─► checkpoint (atomic, every M steps and on shutdown)
//! ```
//! - [`replay`]: the in-GPU replay and the in-RAM baseline.
//! - [`trainer`]: the trainer thread, its rate limiter and its handle.
//! - [`checkpoint`]: atomic save and restore of the learner and counters.
//! - [`bench`]: the paper's Table 1 and Figure 3 in one run.

pub mod bench;
pub mod checkpoint;
pub mod replay;
pub mod trainer;

// Service half (HTTP API, registry, metrics, config). Data flow of a request:
//   api::app (axum router, one module per route group) ─► state::Manager (shared)
//     experience upload ─► decode + validate (blocking pool) ─► dedup ─► trainer::TrainerHandle::try_ingest
//     trainer thread ─► publish callback ─► registry (models on disk) ─► GET /api/v1/models/...
//     stats::sampler (every interval) ─► time series, metrics ─► GET /api/v1/stats, /metrics
// - config: the TOML file and the CLI;  error: the API's one error enum;
// - fleet: worker registry and epsilon ladder;  server: start-up and shutdown.
// - live: live matches, worker frames fanned out to browsers (api::live, api::web).
// - launch: `shine-manager launch-script`, the configs/ files for a worker fleet.
pub mod api;
pub mod config;
pub mod error;
pub mod fleet;
pub mod launch;
pub mod live;
pub mod metrics;
pub mod registry;
pub mod server;
pub mod state;
pub mod stats;
pub use server::{run, serve};
