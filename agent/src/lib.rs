//! `shine-agent`: what a bot is.
//!
//! Layout and data flow (one frame of a worker):
//! ```text
//! RamView ─► state::StateReader ─► Observation (27 floats + raw facts)
//!                                      │
//!   policy::Policy / model::QNet ◄─────┘ picks a macro-action (actions::ActionSet)
//!                                      │
//! env::Env plays its pad script ─► task::Episode: reward, terminal or time limit
//!                                      │
//! experience: 57-float transitions, encoded for upload ─► manager
//! ```
//! - [`state`]: the 27-float state of the reference, section 1.
//! - [`actions`]: macro-actions as per-frame pad scripts.
//! - [`task`]: rewards and episode end.
//! - [`env`]: an emulator seen through the agent's eyes.
//! - [`policy`]: baselines (idle, random, dodge) and greedy play of a model.
//! - [`experience`]: the upload wire format.
//! - [`model`]: the model file (safetensors) and pure-Rust inference.
//! - [`stats`]: the survival rate and its confidence interval.
//! - `dqn` (feature `torch`, the manager only): the Dueling DQN in tch.

pub mod actions;
pub mod env;
pub mod experience;
pub mod model;
pub mod policy;
pub mod state;
pub mod stats;
pub mod task;

#[cfg(feature = "torch")]
pub mod dqn;

pub use actions::ActionSet;
pub use env::Env;
pub use state::{Observation, StateReader, STATE_DIM};
pub use task::{EpisodeEnd, Task};
