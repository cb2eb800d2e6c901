//! `shine-agent`: what a bot is.
//!
//! Layout and data flow (one frame of a worker):
//! ```text
//! RamView ─► state::StateReader ─► Observation (27 floats + raw facts)
//!                                      │
//!   policy::Policy / model::QNet ◄─────┘ picks a macro-action (actions::ActionSet)
//!                                      │
//! seat::Seat plays its pad script ─► task::Episode: reward, terminal or time limit
//!                                      │
//! experience: 57-float transitions, encoded for upload ─► manager
//! ```
//! Between the two binaries (the contracts, each defined once):
//! ```text
//! worker ─ experience (binary upload) ─────────────► manager
//! worker ◄ protocol (JSON: registration, heartbeats, episodes, live frames) ► manager
//! worker ◄ model (safetensors) ───────────────────── manager
//! ```
//! - [`state`]: the 27-float state of docs/melee-reference.md, section 1.
//! - [`actions`]: macro-actions as per-frame pad scripts.
//! - [`task`]: rewards and episode end.
//! - [`side`]: which fighter a bot plays, and the match from its point of view.
//! - [`seat`]: one side of a match, a pad a frame: a policy, its state reader, the
//!   macro-action in play (and its score, for a learner): the one model of a match.
//! - [`env`](mod@env): an emulator seen through the agent's eyes (the bot's seat, its
//!   decisions the caller's).
//! - [`policy`]: baselines (idle, random, dodge) and greedy play of a model.
//! - [`experience`]: the upload wire format.
//! - [`protocol`]: the JSON messages of the HTTP API (`docs/api.md`).
//! - [`model`]: the model file (safetensors) and pure-Rust inference.
//! - [`stats`]: the survival rate and its confidence interval.
//! - [`durable`]: crash-safe file writes and the wall clock (both binaries).
//! - `shutdown` (feature `shutdown`, both binaries): the signal half of the one
//!   shutdown pattern.
//! - `dqn` (feature `torch`, the manager only): the Dueling DQN in tch; its train step
//!   in plain autograd, to read first, is `src/dqn/reference.rs` (tests only).
//! - `optim` (feature `torch`, crate-private): its optimizers over one flat parameter
//!   buffer, and their configuration.
//! - `hostmem` (feature `torch`): CPU tensors as slices and fast loops over them, for
//!   the optimizer and the manager's prioritized sampling.
//! - `aten` (feature `torch`): libtorch calls tch does not expose, through a C++ shim:
//!   the ops a stretch of work dispatches (the tests' measure of a step's GPU cost),
//!   Adam's fused kernel, addmm with its bias and ReLU, a storage's handle count.
//!
//! `unsafe` is denied in the whole crate except three modules that allow it, each with a
//! `# Safety` section: `hostmem`, `aten` and `model::sgemm`. The workspace's checks
//! (`checks/tests/unsafe_audit.rs`) hold every crate to their list of such modules.

#![deny(unsafe_code)]

pub mod actions;
pub mod durable;
pub mod env;
pub mod experience;
pub mod model;
pub mod policy;
pub mod protocol;
pub mod seat;
pub mod side;
pub mod state;
pub mod stats;
pub mod task;

#[cfg(feature = "torch")]
pub mod aten;
#[cfg(feature = "torch")]
pub mod dqn;
#[cfg(feature = "torch")]
pub mod hostmem;
#[cfg(feature = "torch")]
mod optim;
#[cfg(feature = "shutdown")]
pub mod shutdown;

pub use actions::ActionSet;
pub use env::Env;
pub use seat::{Move, Seat};
pub use side::Side;
pub use state::{Observation, StateReader, STATE_DIM};
pub use task::{EpisodeEnd, Task};
