//! A run's files: where its directory is, the `run.toml` of a run created through the
//! API, the `state.toml` of what the API changed (pause), a data directory from before
//! runs, and where a deleted run is kept. Every rename is followed by an fsync of the
//! directories it touched ([`shine_agent::durable::rename`]).
//!
//! ```text
//! <data_dir>/runs/<name>/checkpoint/   the learner (crate::storage::checkpoint)
//!                        models/       published models (crate::storage::registry)
//!                        wal/          accepted uploads (crate::storage::wal)
//!                        run.toml      the run's [[runs]] entry, for runs created
//!                                      through the API (declared runs live in the config)
//!                        state.toml    paused or not, as last set through the API
//! <data_dir>/deleted/<name>-<unix time>/   a run deleted through the API, kept
//! ```
//!
//! A data directory from before runs (`checkpoint/`, `models/`, `wal/` at its top) is
//! moved into `runs/default/` on the first start ([`migrate_legacy`]); each move is one
//! rename, so a start interrupted half-way finishes the moves the next time.

use super::Source;
use crate::config::{Config, RunSpec, DEFAULT_RUN};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use shine_agent::durable::{self, write_atomic};
use std::path::{Path, PathBuf};

pub fn runs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("runs")
}

pub fn run_dir(data_dir: &Path, name: &str) -> PathBuf {
    runs_dir(data_dir).join(name)
}

/// What a data directory from before runs holds at its top.
const LEGACY: [&str; 3] = ["checkpoint", "models", "wal"];

/// Move a pre-runs data directory's `checkpoint/`, `models/` and `wal/` into
/// `runs/default/`. Returns whether anything moved.
pub fn migrate_legacy(data_dir: &Path) -> anyhow::Result<bool> {
    let to = run_dir(data_dir, DEFAULT_RUN);
    let mut moved = false;
    for name in LEGACY {
        let from = data_dir.join(name);
        if !from.exists() {
            continue;
        }
        if to.join(name).exists() {
            anyhow::bail!(
                "{} and {} both exist: the data directory holds a run from before runs and the run {DEFAULT_RUN:?} alike; move one of them away",
                from.display(),
                to.join(name).display()
            );
        }
        std::fs::create_dir_all(&to).with_context(|| format!("creating {}", to.display()))?;
        durable::rename(&from, &to.join(name)).with_context(|| format!("moving {} into {}", from.display(), to.display()))?;
        moved = true;
    }
    if moved {
        tracing::info!(from = %data_dir.display(), to = %to.display(), "moved the data of the run from before runs into the run \"default\"");
    }
    Ok(moved)
}

/// `run.toml`: the entry of a run created through the API.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Stored {
    run: RunSpec,
}

/// `state.toml`: what the API changed about a run.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    paused: bool,
}

/// The pause as the API last set it in `dir` (`state.toml`), if it ever did.
pub(super) fn read_paused(dir: &Path) -> anyhow::Result<Option<bool>> {
    let path = dir.join("state.toml");
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(toml::from_str::<State>(&t).with_context(|| format!("parsing {}", path.display()))?.paused)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Remember the pause across restarts (`state.toml`, written atomically).
pub(super) fn write_paused(dir: &Path, paused: bool) -> anyhow::Result<()> {
    let text = toml::to_string(&State { paused }).expect("plain struct");
    let path = dir.join("state.toml");
    write_atomic(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// Keep the entry of a run created through the API (`run.toml`), for the next start.
pub(super) fn write_stored(dir: &Path, spec: &RunSpec) -> anyhow::Result<()> {
    let path = dir.join("run.toml");
    let text = toml::to_string(&Stored { run: spec.clone() }).context("writing run.toml")?;
    write_atomic(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// Move a deleted run's directory out of `runs/` (nothing is erased); where it went.
pub(super) fn keep_deleted(data_dir: &Path, name: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    let to = deleted_dir(data_dir, name);
    let parent = to.parent().expect("under deleted/");
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    durable::rename(dir, &to).with_context(|| format!("moving {} to {}", dir.display(), to.display()))?;
    Ok(to)
}

/// The runs to open: the config's (or `default`), then those created through the API
/// in an earlier life of this data directory, by name.
pub fn discover(config: &Config) -> anyhow::Result<Vec<(RunSpec, Source)>> {
    let declared: Vec<RunSpec> = if config.runs.is_empty() { vec![RunSpec { name: DEFAULT_RUN.into(), ..RunSpec::empty() }] } else { config.runs.clone() };
    let mut out: Vec<(RunSpec, Source)> = declared.into_iter().map(|s| (s, Source::Config)).collect();
    let dir = runs_dir(&config.server.data_dir);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(out) };
    let mut stored = Vec::new();
    for e in entries {
        let path = e?.path().join("run.toml");
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let s: Stored = toml::from_str(&text).with_context(|| format!("parsing {} (a run created through the API; fix or delete the file)", path.display()))?;
        if out.iter().any(|(d, _)| d.name == s.run.name) {
            tracing::warn!(run = %s.run.name, path = %path.display(), "the config declares this run too: its [[runs]] entry wins");
            continue;
        }
        stored.push((s.run, Source::Api));
    }
    stored.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    out.extend(stored);
    Ok(out)
}

/// Where a deleted run's directory goes: `<data_dir>/deleted/<name>-<unix time>`.
pub fn deleted_dir(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("deleted").join(format!("{name}-{}", shine_agent::durable::unix_now() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_from_before_runs_moves_into_the_default_run() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        for name in LEGACY {
            std::fs::create_dir_all(d.join(name)).unwrap();
            std::fs::write(d.join(name).join("f"), name).unwrap();
        }
        // A start interrupted after the first move: the second finishes the rest.
        std::fs::create_dir_all(run_dir(d, DEFAULT_RUN)).unwrap();
        std::fs::rename(d.join("checkpoint"), run_dir(d, DEFAULT_RUN).join("checkpoint")).unwrap();
        assert!(migrate_legacy(d).unwrap());
        for name in LEGACY {
            assert!(!d.join(name).exists());
            assert_eq!(std::fs::read_to_string(run_dir(d, DEFAULT_RUN).join(name).join("f")).unwrap(), name);
        }
        assert!(!migrate_legacy(d).unwrap(), "nothing left to move");
        std::fs::create_dir_all(d.join("wal")).unwrap();
        let e = migrate_legacy(d).unwrap_err().to_string();
        assert!(e.contains("both exist"), "{e}");
    }
}
