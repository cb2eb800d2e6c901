//! The manager's runs by name: looking one up, creating one (`POST /runs`) and deleting
//! one (`DELETE /runs/{run}`). Creating and deleting are serialised (each takes seconds:
//! files, the device) and blocking: call them off the async runtime.

use super::{store, Run, Source};
use crate::config::{Config, RunSpec};
use crate::device::Device;
use crate::history::History;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use thiserror::Error;

/// Why a run could not be found, created or deleted.
#[derive(Debug, Error)]
pub enum RunError {
    /// No run of that name (HTTP 404); `runs` are the names there are.
    #[error("no run {name:?}; runs: {} (GET /api/v1/runs)", runs.join(", "))]
    NotFound { name: String, runs: Vec<String> },
    /// A bad `[[runs]]` entry, or data under the run's directory that does not fit it
    /// (HTTP 422 `invalid_run`).
    #[error("{0}")]
    Invalid(String),
    /// The name is taken (HTTP 409 `run_exists`).
    #[error("a run named {0:?} exists already")]
    Exists(String),
    /// A delete without `confirm` equal to the run's name (HTTP 400 `confirm_required`).
    #[error("deleting a run stops its training for good: repeat its name, DELETE /api/v1/runs/{0}?confirm={0}")]
    ConfirmRequired(String),
    /// The run is declared in the config file (HTTP 409 `declared_in_config`).
    #[error("run {0:?} is declared in the config file: remove it there and restart (or pause it: POST /api/v1/runs/{0}/pause)")]
    DeclaredInConfig(String),
    /// Something broke on the manager's side (HTTP 500; logged).
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// A run deleted through the API.
pub struct Deleted {
    /// Its last life, for what the service keeps about runs (metrics, workers).
    pub run: Arc<Run>,
    /// Where its data went (nothing is erased).
    pub kept_at: PathBuf,
}

/// Every run, by name. Each is an `Arc`, so a request keeps its run while it is removed
/// from the map (a delete waits for nothing but the device).
#[derive(Default)]
pub struct Runs {
    by_name: RwLock<BTreeMap<String, Arc<Run>>>,
    /// Serialises creating and deleting runs.
    changes: Mutex<()>,
}

impl Runs {
    /// The run named `name`.
    pub fn get(&self, name: &str) -> Result<Arc<Run>, RunError> {
        let runs = self.by_name.read().expect("runs lock");
        runs.get(name).cloned().ok_or_else(|| RunError::NotFound { name: name.to_string(), runs: runs.keys().cloned().collect() })
    }

    /// Every run, by name.
    pub fn all(&self) -> Vec<Arc<Run>> {
        self.by_name.read().expect("runs lock").values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.by_name.read().expect("runs lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Open every run of `config` and those created through the API before (at start-up).
    pub fn open_all(&self, config: &Config, device: &Device, history: &History) -> anyhow::Result<()> {
        for (spec, source) in store::discover(config)? {
            let run = Run::open(spec, source, config, device, history)?;
            self.by_name.write().expect("runs lock").insert(run.name.clone(), Arc::new(run));
        }
        Ok(())
    }

    /// Create a run from a `[[runs]]` entry (`POST /runs`). Checked before anything is
    /// written: a bad entry changes nothing. Blocking.
    pub fn create(&self, spec: RunSpec, config: &Config, device: &Device, history: &History) -> Result<Arc<Run>, RunError> {
        let settings = spec.resolve(config).map_err(|e| RunError::Invalid(format!("{e:#}")))?;
        let _changing = self.changes.lock().expect("run changes lock");
        if self.by_name.read().expect("runs lock").contains_key(&spec.name) {
            return Err(RunError::Exists(spec.name));
        }
        let mut runs: Vec<_> = self.all().iter().map(|r| r.settings().clone()).collect();
        runs.push(settings.clone());
        crate::config::check_opponent(&settings, &runs).map_err(|e| RunError::Invalid(format!("{e:#}")))?;
        // What fails here is the data under the run's directory (a checkpoint of another
        // action set, say): the request's to fix, not the manager's.
        let run = Arc::new(Run::open(spec, Source::Api, config, device, history).map_err(|e| RunError::Invalid(format!("{e:#}")))?);
        self.by_name.write().expect("runs lock").insert(run.name.clone(), run.clone());
        tracing::info!(run = %run.name, "run created");
        Ok(run)
    }

    /// Delete a run created through the API (`DELETE /runs/{run}?confirm={run}`): new
    /// requests for it are refused at once; the device takes its queued uploads in,
    /// writes its final checkpoint and lets it go; its directory moves under
    /// `deleted/`. Blocking.
    pub fn delete(&self, name: &str, confirm: Option<&str>, config: &Config, device: &Device) -> Result<Deleted, RunError> {
        let run = self.get(name)?;
        if confirm != Some(name) {
            return Err(RunError::ConfirmRequired(name.to_string()));
        }
        if run.source == Source::Config {
            return Err(RunError::DeclaredInConfig(name.to_string()));
        }
        let _changing = self.changes.lock().expect("run changes lock");
        if self.by_name.write().expect("runs lock").remove(name).is_none() {
            // Deleted by a request that got here first.
            return Err(RunError::NotFound { name: name.to_string(), runs: self.all().iter().map(|r| r.name.clone()).collect() });
        }
        device.remove_run(&run.handle)?;
        let kept_at = store::keep_deleted(&config.server.data_dir, name, &run.dir)?;
        tracing::info!(run = %name, kept_at = %kept_at.display(), "run deleted");
        Ok(Deleted { run, kept_at })
    }
}
