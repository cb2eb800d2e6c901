//! Checkpoints: everything needed to continue training after a restart or a crash.
//!
//! One file, `<data_dir>/checkpoint/checkpoint.safetensors`, holding
//! - the learner's tensors ([`Learner::state_tensors`]: online and target weights,
//!   optimizer state), f32;
//! - `model_file`: the bytes of the last published model (u8), so a restarted
//!   manager serves exactly the model it served before, under the same version;
//! - metadata key `shine_checkpoint`: [`CheckpointMeta`] as JSON (counters, action
//!   set, the configuration in force, for the record).
//!
//! Written atomically (`shine_agent::durable::write_atomic`): to
//! `checkpoint.safetensors.tmp` in the same directory, fsynced, then renamed over the
//! old file (rename within a directory is atomic on POSIX), and the directory fsynced.
//! A crash at any point leaves either the old or the new checkpoint, never half of one.
//! The replay is not in it (256 MB at the paper's size, rewritten at every
//! checkpoint): the write-ahead log keeps the uploads instead, and a restart rebuilds
//! the replay from it (`crate::storage::wal`).

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use shine_agent::dqn::Learner;
use shine_agent::durable;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tch::{Device, Kind, Tensor};

pub const FORMAT: &str = "shine-checkpoint";
pub const FORMAT_VERSION: u32 = 1;
const META_KEY: &str = "shine_checkpoint";
const MODEL_FILE: &str = "model_file";

/// RunCounters that continue across restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounters {
    /// Train steps taken over the whole run.
    pub train_step: u64,
    /// Optimizer updates since its state was created (Adam's bias correction).
    pub optimizer_steps: u64,
    /// Version of the last published model (the one in `model_file`).
    pub model_version: u64,
    /// Train step of the last published model.
    pub model_train_step: u64,
    /// Transitions inserted into the replay over the whole run (read from checkpoints
    /// written before the rename too).
    #[serde(alias = "experiences_total")]
    pub transitions_inserted: u64,
    /// Transitions sampled for training over the whole run.
    #[serde(alias = "samples_total")]
    pub transitions_sampled: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    pub format: String,
    pub format_version: u32,
    pub counters: RunCounters,
    /// Action-set name: a checkpoint only fits a learner with the same actions.
    pub action_set: String,
    /// The `[trainer]`, `[replay]` and `[dqn]` sections in force when it was saved.
    pub config: serde_json::Value,
    /// Seconds since the Unix epoch.
    pub saved_at: u64,
}

/// A loaded checkpoint (tensors on the host; [`Learner::load_state`] moves them).
pub struct Checkpoint {
    pub meta: CheckpointMeta,
    pub tensors: HashMap<String, Tensor>,
    pub model_file: Vec<u8>,
}

pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("checkpoint")
}

pub fn path(data_dir: &Path) -> PathBuf {
    dir(data_dir).join("checkpoint.safetensors")
}

/// Write a checkpoint of `learner` atomically; returns its path.
pub fn save(
    data_dir: &Path,
    learner: &Learner,
    counters: &RunCounters,
    action_set: &str,
    config: serde_json::Value,
    model_file: &[u8],
) -> anyhow::Result<PathBuf> {
    use safetensors::tensor::{Dtype, TensorView};
    let meta = CheckpointMeta {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        counters: counters.clone(),
        action_set: action_set.into(),
        config,
        saved_at: durable::unix_now() as u64,
    };
    // Tensors to host bytes (one sync with the device, every few thousand steps).
    let mut blobs: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in learner.state_tensors() {
        let t = t.to_device(Device::Cpu).to_kind(Kind::Float).contiguous();
        let shape = t.size().iter().map(|&d| d as usize).collect();
        let floats = Vec::<f32>::try_from(&t.view([-1])).with_context(|| format!("reading {name} to the host"))?;
        blobs.push((name, shape, floats.iter().flat_map(|v| v.to_le_bytes()).collect()));
    }
    let mut views = Vec::with_capacity(blobs.len() + 1);
    for (name, shape, bytes) in &blobs {
        views.push((name.clone(), TensorView::new(Dtype::F32, shape.clone(), bytes)?));
    }
    views.push((MODEL_FILE.to_string(), TensorView::new(Dtype::U8, vec![model_file.len()], model_file)?));
    let metadata = HashMap::from([(META_KEY.to_string(), serde_json::to_string(&meta)?)]);
    let bytes = safetensors::serialize(views, Some(metadata))?;

    let dir = dir(data_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let final_path = path(data_dir);
    durable::write_atomic(&final_path, &bytes).with_context(|| format!("writing {}", final_path.display()))?;
    Ok(final_path)
}

/// The checkpoint in `data_dir`, `None` when there is none. A file that exists but
/// cannot be read is an error (not a silent fresh start that would then overwrite it).
pub fn load(data_dir: &Path) -> anyhow::Result<Option<Checkpoint>> {
    let p = path(data_dir);
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading checkpoint {}", p.display())),
    };
    let hint = || format!("checkpoint {} is unreadable; move it away to start training from scratch", p.display());
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).with_context(hint)?;
    let meta_json = header.metadata().as_ref().and_then(|m| m.get(META_KEY)).with_context(|| format!("{}: no {META_KEY} metadata", hint()))?;
    let meta: CheckpointMeta = serde_json::from_str(meta_json).with_context(hint)?;
    if meta.format != FORMAT || meta.format_version != FORMAT_VERSION {
        bail!("{}: format {} version {} (this manager reads {FORMAT} version {FORMAT_VERSION})", hint(), meta.format, meta.format_version);
    }
    let st = safetensors::SafeTensors::deserialize(&bytes).with_context(hint)?;
    let mut tensors = HashMap::new();
    let mut model_file = None;
    for (name, view) in st.tensors() {
        if name == MODEL_FILE {
            model_file = Some(view.data().to_vec());
            continue;
        }
        if view.dtype() != safetensors::Dtype::F32 {
            bail!("{}: tensor {name} is {:?}, expected F32", hint(), view.dtype());
        }
        let floats: Vec<f32> = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        tensors.insert(name, Tensor::from_slice(&floats).view(shape.as_slice()));
    }
    let model_file = model_file.with_context(|| format!("{}: no {MODEL_FILE}", hint()))?;
    Ok(Some(Checkpoint { meta, tensors, model_file }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shine_agent::dqn::{row, DqnConfig, Group};

    fn trained_learner() -> Learner {
        let mut l = Learner::new(&DqnConfig::default(), 5, Device::Cpu).unwrap();
        // Three steps of it alone (a group of one) on random device rows.
        let rows = Tensor::rand([1, 32, row::WIDTH as i64], (Kind::Float, Device::Cpu));
        let mut alone = Group::new(&mut [&mut l], false).unwrap();
        for _ in 0..3 {
            alone.device_step(&rows, None).unwrap();
        }
        for _ in 0..3 {
            l.finish_step();
        }
        l
    }

    #[test]
    fn save_then_load_round_trips_everything() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(load(tmp.path()).unwrap().is_none(), "no checkpoint yet");
        let l = trained_learner();
        let counters =
            RunCounters { train_step: 3, optimizer_steps: 3, model_version: 2, model_train_step: 2, transitions_inserted: 99, transitions_sampled: 48 };
        let config = serde_json::json!({"dqn": {"gamma": 0.99}});
        save(tmp.path(), &l, &counters, "untouchable", config.clone(), b"model bytes").unwrap();
        let ck = load(tmp.path()).unwrap().expect("a checkpoint");
        assert_eq!(ck.meta.counters, counters);
        assert_eq!(ck.meta.action_set, "untouchable");
        assert_eq!(ck.meta.config, config);
        assert_eq!(ck.model_file, b"model bytes");
        let mut r = Learner::new(&DqnConfig::default(), 5, Device::Cpu).unwrap();
        assert!(r.load_state(&ck.tensors, 3, 3).unwrap());
        assert_eq!(r.online.weights(), l.online.weights());
        assert_eq!(r.target.weights(), l.target.weights());
        assert!(!dir(tmp.path()).join("checkpoint.safetensors.tmp").exists(), "the temp file was renamed");
    }

    #[test]
    fn a_leftover_temp_file_does_not_replace_the_checkpoint() {
        // A crash mid-write leaves only the temp file; the last good checkpoint stays.
        let tmp = tempfile::tempdir().unwrap();
        let l = trained_learner();
        let counters = RunCounters { train_step: 7, ..Default::default() };
        save(tmp.path(), &l, &counters, "untouchable", serde_json::Value::Null, b"m").unwrap();
        std::fs::write(dir(tmp.path()).join("checkpoint.safetensors.tmp"), b"half a checkp").unwrap();
        assert_eq!(load(tmp.path()).unwrap().unwrap().meta.counters.train_step, 7);
        // And the next save replaces the leftover.
        save(tmp.path(), &l, &RunCounters { train_step: 8, ..Default::default() }, "untouchable", serde_json::Value::Null, b"m").unwrap();
        assert_eq!(load(tmp.path()).unwrap().unwrap().meta.counters.train_step, 8);
    }

    #[test]
    fn a_corrupt_checkpoint_is_an_error_that_says_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir(tmp.path())).unwrap();
        std::fs::write(path(tmp.path()), b"garbage").unwrap();
        let err = format!("{:#}", load(tmp.path()).err().expect("an error"));
        assert!(err.contains("move it away"), "{err}");
    }
}
