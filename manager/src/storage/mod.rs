//! What the learner keeps, the manager's bottom layer (`checks/tests/layers.rs`): nothing here
//! uses the layers above.
//!
//! - [`replay`]: the replay, on the training device (the paper's in-GPU replay) or in
//!   RAM (the baseline), uniform or prioritized ([`prioritized`]: the priorities).
//! - [`checkpoint`]: a run's learner state and counters on disk.
//! - [`registry`]: the published models on disk, and which of them are kept.
//! - [`wal`]: the write-ahead log of accepted uploads (what a restart replays).

pub mod checkpoint;
pub mod prioritized;
pub mod registry;
pub mod replay;
pub mod wal;
