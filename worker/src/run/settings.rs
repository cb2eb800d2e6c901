//! `shine-worker run`'s settings: one struct, [`RunArgs`], is both the command line
//! (clap) and the `--config` TOML file (serde), so a key cannot exist in one and not
//! the other; [`Settings::resolve`] layers them (flags and environment variables, then
//! the file, then defaults) into the values `run` uses.

use crate::games::backend::Backend;
use crate::pipeline::spool::SpoolLimits;
use anyhow::{bail, Context};
use clap::Args;
use rand::Rng;
use serde::Deserialize;
use std::path::PathBuf;

/// `shine-worker run`. Every flag can also be a key of the `--config` TOML file
/// (same name, `_` for `-`); flags and environment variables win over the file.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The manager's address, e.g. http://manager:8080.
    #[arg(long, env = "SHINE_MANAGER")]
    pub manager: Option<String>,
    /// The manager's bearer token (its --token).
    #[arg(long, env = "SHINE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The manager's run to play for (GET /api/v1/runs lists them) [default: the run
    /// the manager assigns: the one with the fewest workers for its weight].
    #[arg(long, env = "SHINE_RUN")]
    pub run: Option<String>,
    /// Where the game runs [default: sim].
    #[arg(long, value_enum, env = "SHINE_BACKEND")]
    pub backend: Option<Backend>,
    /// Environments played at once: a number, or `auto` to find the count that gives
    /// the most useful frames per second while running [default: one per CPU core].
    /// With Dolphin, each is a Dolphin of its own.
    #[arg(long, env = "SHINE_ENVS")]
    pub envs: Option<Envs>,
    /// With --backend dolphin: your Melee NTSC 1.02 disc image (Shine cannot ship it).
    #[arg(long, env = "SHINE_ISO")]
    pub iso: Option<PathBuf>,
    /// With --backend dolphin: the dolphin-emu-nogui to run [default: found on PATH or in /usr/games].
    #[arg(long, env = "SHINE_DOLPHIN")]
    pub dolphin: Option<PathBuf>,
    /// Where unsent gameplay is kept [default: ~/.cache/shine/spool].
    #[arg(long, env = "SHINE_SPOOL_DIR")]
    pub spool_dir: Option<PathBuf>,
    /// Most MiB the spool may hold before the oldest batches are dropped [default: 1024].
    #[arg(long, env = "SHINE_SPOOL_MAX_MB")]
    pub spool_max_mb: Option<u64>,
    /// Most batches the spool may hold before the oldest are dropped [default: 10000].
    #[arg(long)]
    pub spool_max_batches: Option<usize>,
    /// Seed of all randomness (episodes, exploration) [default: random, logged].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the worker's counters as JSON to this file when it exits.
    #[arg(long)]
    pub stats_file: Option<PathBuf>,
    /// A TOML file with any of the keys above.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

/// `--envs`: a fixed count, or `auto` ([`crate::pipeline::tuner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envs {
    Fixed(usize),
    Auto,
}

impl std::str::FromStr for Envs {
    type Err = String;
    fn from_str(s: &str) -> Result<Envs, String> {
        match s.trim() {
            "auto" => Ok(Envs::Auto),
            n => n.parse().map(Envs::Fixed).map_err(|_| format!("{s:?} is neither a number of environments nor auto")),
        }
    }
}

impl std::fmt::Display for Envs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Envs::Fixed(n) => write!(f, "{n}"),
            Envs::Auto => f.write_str("auto"),
        }
    }
}

/// In the config file: `envs = 4` or `envs = "auto"`.
impl<'de> Deserialize<'de> for Envs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Envs, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(usize),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Envs::Fixed(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Everything `run` needs, resolved: flags, then environment, then file, then defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    pub manager: String,
    pub token: String,
    /// The run to join; `None`: the one the manager assigns.
    pub run: Option<String>,
    pub backend: Backend,
    pub envs: Envs,
    /// The game image and the emulator, for the Dolphin backend.
    pub iso: Option<PathBuf>,
    pub dolphin: Option<PathBuf>,
    pub spool_dir: PathBuf,
    pub spool_limits: SpoolLimits,
    pub seed: u64,
    pub stats_file: Option<PathBuf>,
}

fn default_spool_dir() -> anyhow::Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
        .context("no HOME to put the spool in: pass --spool-dir or set SHINE_SPOOL_DIR")?;
    Ok(cache.join("shine").join("spool"))
}

impl Settings {
    pub fn resolve(args: RunArgs) -> anyhow::Result<Settings> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading --config {}", path.display()))?;
                toml::from_str::<RunArgs>(&text).with_context(|| format!("--config {}: not a valid worker config", path.display()))?
            }
            None => RunArgs::default(),
        };
        let manager = args
            .manager
            .or(file.manager)
            .context("no manager address: pass --manager URL, set SHINE_MANAGER, or put manager = \"http://...\" in the --config file")?;
        let token = args.token.or(file.token).context("no token: pass --token, set SHINE_TOKEN, or put token = \"...\" in the --config file")?;
        let envs = match args.envs.or(file.envs) {
            Some(Envs::Fixed(0)) => bail!("--envs must be at least 1 (or auto)"),
            Some(e) => e,
            None => Envs::Fixed(std::thread::available_parallelism().map_or(1, |n| n.get())),
        };
        let defaults = SpoolLimits::default();
        let spool_limits = SpoolLimits {
            max_bytes: args.spool_max_mb.or(file.spool_max_mb).map_or(defaults.max_bytes, |mb| mb.saturating_mul(1 << 20)),
            max_batches: args.spool_max_batches.or(file.spool_max_batches).unwrap_or(defaults.max_batches).max(1),
        };
        Ok(Settings {
            manager,
            token,
            run: args.run.or(file.run).filter(|r| !r.is_empty()),
            backend: args.backend.or(file.backend).unwrap_or(Backend::Sim),
            envs,
            iso: args.iso.or(file.iso),
            dolphin: args.dolphin.or(file.dolphin),
            spool_dir: match args.spool_dir.or(file.spool_dir) {
                Some(d) => d,
                None => default_spool_dir()?,
            },
            spool_limits,
            seed: args.seed.or(file.seed).unwrap_or_else(|| rand::rng().random()),
            stats_file: args.stats_file.or(file.stats_file),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_config_file_and_typos_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("worker.toml");
        std::fs::write(&file, "manager = \"http://file:1\"\ntoken = \"from-file\"\nenvs = 3\nspool_max_mb = 2\nbackend = \"dolphin\"\n").unwrap();
        let args = RunArgs {
            manager: Some("http://flag:2".into()),
            envs: Some(Envs::Fixed(5)),
            spool_dir: Some(dir.path().join("s")),
            seed: Some(9),
            config: Some(file.clone()),
            ..Default::default()
        };
        let s = Settings::resolve(args).unwrap();
        assert_eq!((s.manager.as_str(), s.token.as_str(), s.envs, s.seed), ("http://flag:2", "from-file", Envs::Fixed(5), 9));
        assert_eq!((s.backend, s.spool_limits.max_bytes, s.spool_limits.max_batches), (Backend::Dolphin, 2 << 20, SpoolLimits::default().max_batches));

        // --envs auto, on the command line and in the file; nonsense is an error.
        assert_eq!("auto".parse::<Envs>(), Ok(Envs::Auto));
        assert_eq!("3".parse::<Envs>(), Ok(Envs::Fixed(3)));
        assert!("lots".parse::<Envs>().unwrap_err().contains("neither a number"));
        std::fs::write(&file, "manager = \"http://m\"\ntoken = \"t\"\nenvs = \"auto\"\n").unwrap();
        let s = Settings::resolve(RunArgs { config: Some(file.clone()), spool_dir: Some(dir.path().into()), ..Default::default() }).unwrap();
        assert_eq!(s.envs, Envs::Auto);
        std::fs::write(&file, "manager = \"http://m\"\ntoken = \"t\"\nenvs = \"lots\"\n").unwrap();
        let err = Settings::resolve(RunArgs { config: Some(file.clone()), ..Default::default() }).unwrap_err();
        assert!(format!("{err:#}").contains("neither a number"), "{err:#}");

        std::fs::write(&file, "manger = \"http://typo\"\n").unwrap();
        let err = Settings::resolve(RunArgs { config: Some(file), ..Default::default() }).unwrap_err();
        assert!(format!("{err:#}").contains("manger"), "{err:#}");
        let err = Settings::resolve(RunArgs { manager: Some("http://m".into()), spool_dir: Some(dir.path().into()), ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("SHINE_TOKEN"), "{err}");
    }
}
