//! The model registry: published models on disk, and which of them to keep.
//!
//! Layout under `{data_dir}/models/`:
//! ```text
//! model-0000000007.safetensors   the model file, byte for byte what workers download
//! index.json                     per version: created time, evaluation tallies; and the
//!                                highest version ever published
//! ```
//! A version number names one set of weights forever: [`Registry::publish`] refuses a
//! number already used for other bytes, and [`Registry::highest_version`] (kept in
//! `index.json`, so pruning cannot lower it) tells a restarted trainer where to go on.
//! Files are written to a temporary name, synced and renamed, so a crash never leaves
//! a half-written model under a real name. The version and train step come from each
//! file's own metadata on start; `index.json` adds what a file cannot hold (evaluation
//! results that arrive after publishing).
//!
//! Kept: the newest `keep_last` (the latest among them), the best `keep_best` by
//! evaluation survival, ranked by the Wilson 95 % lower bound so that one lucky episode
//! does not beat a hundred good ones, the best `keep_best_rated` by league rating
//! (named by the league, [`Registry::keep_for_league`]: ranked by the rating's 95 % lower
//! bound likewise), and the models in a league match not yet counted (so that a worker
//! can download what it was asked to play). Every kept file is also held in memory (about 0.6 MB each), so
//! downloads never touch the disk.
//!
//! Concurrency: a std `RwLock`; the trainer thread publishes (rarely, and may block on
//! the file system there), request handlers read (a clone of `Bytes` under the lock).

use anyhow::Context;
use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use shine_agent::durable;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// `[registry]`: which published models stay on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// The newest this many models (the latest among them).
    pub keep_last: usize,
    /// And the best this many by evaluation survival (Wilson 95 % lower bound, so one
    /// lucky episode does not beat a hundred good ones).
    pub keep_best: usize,
    /// And the best this many by league rating (its 95 % lower bound), as the league
    /// names them.
    pub keep_best_rated: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig { keep_last: 5, keep_best: 3, keep_best_rated: 3 }
    }
}

/// A model the trainer has just published, for the registry.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    pub version: u64,
    /// The train step whose weights it holds.
    pub train_step: u64,
    /// The model file (safetensors).
    pub file: Vec<u8>,
}

/// One published model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    pub version: u64,
    pub train_step: u64,
    pub created_unix: u64,
    pub bytes: u64,
    /// Evaluation episodes played with this model, and how many survived the minute.
    pub eval_episodes: u64,
    pub eval_survived: u64,
    /// The HTTP ETag, derived from the file's bytes ([`etag_of`]); not stored.
    #[serde(skip)]
    pub etag: String,
}

/// A model file's ETag: the first 128 bits of its SHA-256, so a cached copy is never
/// taken for other weights, whatever happened to version numbers.
pub fn etag_of(file: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(file);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

impl ModelEntry {
    pub fn eval_survival(&self) -> Option<f64> {
        (self.eval_episodes > 0).then(|| self.eval_survived as f64 / self.eval_episodes as f64)
    }
    /// Ranking score for "best": the Wilson 95 % lower bound.
    fn eval_score(&self) -> Option<f64> {
        (self.eval_episodes > 0).then(|| shine_agent::stats::wilson95(self.eval_survived, self.eval_episodes).0)
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Index {
    models: Vec<ModelEntry>,
    /// The highest version ever published here (older index files lack it).
    #[serde(default)]
    highest_version: u64,
}

/// The versions the league needs kept.
#[derive(Default)]
struct LeagueKeeps {
    best_rated: Vec<u64>,
    in_play: Vec<u64>,
}

struct Kept {
    entry: ModelEntry,
    file: Bytes,
}

pub struct Registry {
    dir: PathBuf,
    cfg: RegistryConfig,
    models: RwLock<BTreeMap<u64, Kept>>,
    /// What the league asks to keep ([`Registry::keep_for_league`]).
    league: RwLock<LeagueKeeps>,
    highest: std::sync::atomic::AtomicU64,
}

fn file_name(version: u64) -> String {
    format!("model-{version:010}.safetensors")
}

fn now_unix() -> u64 {
    durable::unix_now() as u64
}

impl Registry {
    /// Open (creating) `{data_dir}/models` and load what is there.
    pub fn open(data_dir: &Path, cfg: RegistryConfig) -> anyhow::Result<Registry> {
        let dir = data_dir.join("models");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let index: Index = match std::fs::read(dir.join("index.json")) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "models/index.json unreadable; evaluation results start afresh");
                Index::default()
            }),
            Err(_) => Index::default(),
        };
        let highest_in_index = index.highest_version;
        let known: BTreeMap<u64, ModelEntry> = index.models.into_iter().map(|e| (e.version, e)).collect();
        let mut models = BTreeMap::new();
        for de in std::fs::read_dir(&dir)? {
            let path = de?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".tmp") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if !(name.starts_with("model-") && name.ends_with(".safetensors")) {
                continue;
            }
            let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let meta = match shine_agent::model::QNet::load(&bytes) {
                Ok(net) => net.meta().clone(),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "skipping a model file that does not load");
                    continue;
                }
            };
            let prev = known.get(&meta.model_version);
            let entry = ModelEntry {
                version: meta.model_version,
                train_step: meta.train_step,
                created_unix: prev.map_or_else(now_unix, |p| p.created_unix),
                bytes: bytes.len() as u64,
                eval_episodes: prev.map_or(0, |p| p.eval_episodes),
                eval_survived: prev.map_or(0, |p| p.eval_survived),
                etag: etag_of(&bytes),
            };
            models.insert(entry.version, Kept { entry, file: Bytes::from(bytes) });
        }
        if let Some((v, _)) = models.last_key_value() {
            tracing::info!(models = models.len(), latest = v, dir = %dir.display(), "model registry loaded");
        }
        // A file written just before a crash may not be in the index yet: both count.
        let highest = highest_in_index.max(models.keys().next_back().copied().unwrap_or(0)).max(known.keys().next_back().copied().unwrap_or(0));
        Ok(Registry { dir, cfg, models: RwLock::new(models), league: RwLock::default(), highest: highest.into() })
    }

    /// The highest version ever published here (0: none).
    pub fn highest_version(&self) -> u64 {
        self.highest.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Store a newly published model and prune. The version must be above every one
    /// published before, or be the latest again with the very same bytes (a restart
    /// serving its checkpoint's model): a number never names two sets of weights.
    pub fn publish(&self, model: Published) -> anyhow::Result<()> {
        let Published { version, train_step, file } = model;
        let highest = self.highest_version();
        if version <= highest {
            let same = self.get(version).is_some_and(|(_, kept)| kept[..] == file[..]);
            if !same {
                anyhow::bail!("model version {version} was already published (the highest is {highest}) with other weights: refusing to reuse the number");
            }
            tracing::info!(version, "model served again (the same bytes as before the restart)");
            return Ok(());
        }
        let path = self.dir.join(file_name(version));
        durable::write_atomic(&path, &file).with_context(|| format!("writing {}", path.display()))?;
        let mut models = self.models.write().expect("registry lock");
        self.highest.store(version, std::sync::atomic::Ordering::Release);
        let entry =
            ModelEntry { version, train_step, created_unix: now_unix(), bytes: file.len() as u64, eval_episodes: 0, eval_survived: 0, etag: etag_of(&file) };
        models.insert(version, Kept { entry, file: Bytes::from(file) });
        self.prune(&mut models);
        self.write_index(&models)?;
        tracing::info!(version, train_step, "model published");
        Ok(())
    }

    /// Attach evaluation episodes to the model they were played with. Results for a
    /// model no longer kept are dropped (it can no longer be offered).
    pub fn record_eval(&self, version: u64, episodes: u64, survived: u64) -> anyhow::Result<bool> {
        let mut models = self.models.write().expect("registry lock");
        let Some(k) = models.get_mut(&version) else { return Ok(false) };
        k.entry.eval_episodes += episodes;
        k.entry.eval_survived += survived;
        self.prune(&mut models);
        self.write_index(&models)?;
        Ok(true)
    }

    /// What the league needs kept from now on: the first `keep_best_rated` of its best
    /// rated versions (best first), and every version in a match it has handed out and
    /// not yet counted (the league calls it after each change).
    pub fn keep_for_league(&self, best_rated: Vec<u64>, in_play: Vec<u64>) {
        *self.league.write().expect("registry lock") = LeagueKeeps { best_rated, in_play };
    }

    fn prune(&self, models: &mut BTreeMap<u64, Kept>) {
        let mut keep: Vec<u64> = models.keys().rev().take(self.cfg.keep_last).copied().collect();
        let league = self.league.read().expect("registry lock");
        keep.extend(league.best_rated.iter().take(self.cfg.keep_best_rated).chain(&league.in_play));
        drop(league);
        let mut scored: Vec<(f64, u64)> = models.values().filter_map(|k| k.entry.eval_score().map(|s| (s, k.entry.version))).collect();
        // Best score first; among equals the newer model.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        keep.extend(scored.iter().take(self.cfg.keep_best).map(|(_, v)| *v));
        let drop: Vec<u64> = models.keys().filter(|v| !keep.contains(v)).copied().collect();
        for v in drop {
            models.remove(&v);
            if let Err(e) = std::fs::remove_file(self.dir.join(file_name(v))) {
                tracing::warn!(version = v, error = %e, "could not remove a pruned model file");
            }
        }
    }

    fn write_index(&self, models: &BTreeMap<u64, Kept>) -> anyhow::Result<()> {
        let index = Index { models: models.values().map(|k| k.entry.clone()).collect(), highest_version: self.highest_version() };
        let path = self.dir.join("index.json");
        durable::write_atomic(&path, &serde_json::to_vec_pretty(&index)?).with_context(|| format!("writing {}", path.display()))
    }

    /// Kept models, newest first.
    pub fn list(&self) -> Vec<ModelEntry> {
        self.models.read().expect("registry lock").values().rev().map(|k| k.entry.clone()).collect()
    }

    pub fn latest(&self) -> Option<(ModelEntry, Bytes)> {
        self.models.read().expect("registry lock").last_key_value().map(|(_, k)| (k.entry.clone(), k.file.clone()))
    }

    pub fn latest_version(&self) -> Option<u64> {
        self.models.read().expect("registry lock").last_key_value().map(|(v, _)| *v)
    }

    pub fn get(&self, version: u64) -> Option<(ModelEntry, Bytes)> {
        self.models.read().expect("registry lock").get(&version).map(|k| (k.entry.clone(), k.file.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use shine_agent::model::{random_weights, save, ModelMeta};

    fn model(version: u64) -> Vec<u8> {
        let mut meta = ModelMeta::new("untouchable", 5);
        meta.model_version = version;
        meta.train_step = version * 100;
        save(&meta, &random_weights(&meta, &mut rand::rngs::StdRng::seed_from_u64(version))).unwrap()
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir.join("models"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".safetensors"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn keeps_the_last_k_and_the_best_evaluated() {
        let dir = tempfile::tempdir().unwrap();
        let r = Registry::open(dir.path(), RegistryConfig { keep_last: 2, keep_best: 1, keep_best_rated: 0 }).unwrap();
        r.publish(Published { version: 1, train_step: 100, file: model(1) }).unwrap();
        r.publish(Published { version: 2, train_step: 200, file: model(2) }).unwrap();
        assert!(r.record_eval(2, 50, 45).unwrap());
        assert!(r.record_eval(1, 1, 1).unwrap(), "one lucky episode");
        r.publish(Published { version: 3, train_step: 300, file: model(3) }).unwrap();
        r.publish(Published { version: 4, train_step: 400, file: model(4) }).unwrap();
        let versions: Vec<u64> = r.list().iter().map(|e| e.version).collect();
        assert_eq!(versions, vec![4, 3, 2], "last two and the best (2 beats 1's single episode)");
        assert_eq!(files(dir.path()).len(), 3);
        assert_eq!(r.latest().unwrap().0.version, 4);
        assert_eq!(r.get(2).unwrap().0.eval_survival(), Some(0.9));
        assert!(r.get(1).is_none());
    }

    #[test]
    fn keeps_the_best_rated_the_league_names() {
        let dir = tempfile::tempdir().unwrap();
        let r = Registry::open(dir.path(), RegistryConfig { keep_last: 1, keep_best: 0, keep_best_rated: 2 }).unwrap();
        for v in 1..=3 {
            r.publish(Published { version: v, train_step: v * 100, file: model(v) }).unwrap();
        }
        assert_eq!(r.list().iter().map(|e| e.version).collect::<Vec<_>>(), vec![3], "nothing rated yet: the last one");
        r.publish(Published { version: 4, train_step: 400, file: model(4) }).unwrap();
        r.keep_for_league(vec![4, 9, 2], vec![]);
        for v in 5..=6 {
            r.publish(Published { version: v, train_step: v * 100, file: model(v) }).unwrap();
        }
        // The first two the league names (9 is not here any more); 2 is third: pruned long ago anyway.
        assert_eq!(r.list().iter().map(|e| e.version).collect::<Vec<_>>(), vec![6, 4]);
        assert_eq!(files(dir.path()).len(), 2);
    }

    #[test]
    fn keeps_the_models_in_a_league_match_until_it_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let r = Registry::open(dir.path(), RegistryConfig { keep_last: 1, keep_best: 0, keep_best_rated: 0 }).unwrap();
        let versions = |r: &Registry| r.list().iter().map(|e| e.version).collect::<Vec<_>>();
        r.publish(Published { version: 1, train_step: 100, file: model(1) }).unwrap();
        r.publish(Published { version: 2, train_step: 200, file: model(2) }).unwrap();
        // A worker plays version 2 while newer ones are published.
        r.keep_for_league(vec![], vec![2]);
        for v in 3..=5 {
            r.publish(Published { version: v, train_step: v * 100, file: model(v) }).unwrap();
        }
        assert_eq!(versions(&r), vec![5, 2]);
        assert!(r.get(2).is_some(), "the worker can still download it");
        // Its result counted, nothing keeps it: the next prune drops it.
        r.keep_for_league(vec![], vec![]);
        r.publish(Published { version: 6, train_step: 600, file: model(6) }).unwrap();
        assert_eq!(versions(&r), vec![6]);
        assert_eq!(files(dir.path()).len(), 1);
    }

    #[test]
    fn reopening_restores_models_and_evaluations() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RegistryConfig { keep_last: 3, keep_best: 1, keep_best_rated: 0 };
        let m2 = model(2);
        {
            let r = Registry::open(dir.path(), cfg.clone()).unwrap();
            r.publish(Published { version: 1, train_step: 100, file: model(1) }).unwrap();
            r.publish(Published { version: 2, train_step: 200, file: m2.clone() }).unwrap();
            r.record_eval(2, 10, 7).unwrap();
        }
        let r = Registry::open(dir.path(), cfg).unwrap();
        let (e, bytes) = r.latest().unwrap();
        assert_eq!((e.version, e.train_step, e.eval_episodes, e.eval_survived), (2, 200, 10, 7));
        assert!(bytes.as_ref() == m2.as_slice(), "the same bytes come back");
    }

    #[test]
    fn a_version_number_is_never_given_to_other_weights() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RegistryConfig { keep_last: 1, keep_best: 0, keep_best_rated: 0 };
        {
            let r = Registry::open(dir.path(), cfg.clone()).unwrap();
            let m3 = model(3);
            r.publish(Published { version: 1, train_step: 100, file: model(1) }).unwrap();
            r.publish(Published { version: 2, train_step: 200, file: model(2) }).unwrap();
            r.publish(Published { version: 3, train_step: 300, file: m3.clone() }).unwrap();
            // The same latest version with the same bytes (a restart) is fine.
            r.publish(Published { version: 3, train_step: 300, file: m3 }).unwrap();
            let other = model(99);
            let err = r.publish(Published { version: 2, train_step: 200, file: other.clone() }).unwrap_err().to_string();
            assert!(err.contains("already published"), "{err}");
            assert!(r.publish(Published { version: 3, train_step: 300, file: other }).is_err(), "not even the latest's number");
            assert_eq!(r.latest_version(), Some(3));
        }
        // Pruned to one model, reopened: the highest number survives in the index.
        let r = Registry::open(dir.path(), cfg).unwrap();
        assert_eq!((r.highest_version(), files(dir.path()).len()), (3, 1));
        std::fs::remove_file(dir.path().join("models").join(file_name(3))).unwrap();
        let r2 = Registry::open(dir.path(), RegistryConfig { keep_last: 1, keep_best: 0, keep_best_rated: 0 }).unwrap();
        assert_eq!(r2.highest_version(), 3, "from the index even when the file is gone");
        drop(r);
    }
}
