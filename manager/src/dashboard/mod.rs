//! What the dashboard reads, apart from its HTTP handlers (`crate::api`): a namespace of
//! four modules, each placed on its own in the layer check (`checks/tests/layers.rs`):
//!
//! - [`views`]: the JSON the dashboard and `GET /api/v1/...` answer with, typed;
//! - [`series`]: a run's time series of samples and its recent episodes;
//! - [`sampler`]: takes a run's samples (the server's task every `[stats]
//!   interval_secs`, and `GET /api/v1/stats`);
//! - [`live`]: live matches fanned out to the browsers watching them.

pub mod live;
pub mod sampler;
pub mod series;
pub mod views;
