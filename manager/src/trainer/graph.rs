//! Whether a run's train step can be captured once as a CUDA graph and replayed
//! ([`super::TrainerConfig::cuda_graph`]). The capture and the replays are its group's
//! ([`crate::device::group`]).

use crate::storage::replay::{ReplayConfig, ReplayKind};

/// Whether the train step can be one CUDA graph, or why not ([`super::TrainerConfig::cuda_graph`]).
pub fn graph_applies(device: tch::Device, replay: &ReplayConfig) -> Result<(), String> {
    if !device.is_cuda() {
        return Err(format!("it needs a CUDA device (the device is {device:?})"));
    }
    if !crate::trainer::cuda_graph::BUILT {
        return Err("this build of shine-manager has no CUDA graph support (its PyTorch had no CUDA headers at build time)".into());
    }
    if replay.kind != ReplayKind::Device {
        return Err("it needs the device replay ([replay] kind = \"device\"): the in-RAM replay samples on the host".into());
    }
    Ok(())
}

/// Eager steps before the first capture: libtorch and cuBLAS set themselves up on the
/// first steps (PyTorch's `torch.cuda.graph` warms up likewise).
pub(crate) const GRAPH_WARMUP_STEPS: u64 = 3;
