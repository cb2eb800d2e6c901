//! The manager's configuration: one TOML file (`configs/manager.toml` documents every
//! knob), overridden by command-line flags and `SHINE_*` environment variables.
//!
//! Precedence, lowest to highest: built-in defaults, the file given with `--config`,
//! environment variables, flags (clap resolves flag-over-env; both win over the file).
//! The learner's sections (`[trainer]`, `[replay]`, `[dqn]`) are the learner core's own
//! serde structs, embedded as they are.
//!
//! Runs: `[[runs]]` declares several experiments on one manager ([`RunSpec`]); each
//! names only what differs from the manager's own `[game]`, `[dqn]`, `[replay]` and
//! `[trainer]`, and of `[workers]` its exploration ([`EXPLORATION_KEYS`])
//! ([`Config::runs`] resolves them). No `[[runs]]`: one run named
//! `default` with the manager's sections, as before runs existed.

use crate::history::HistoryConfig;
use crate::league::LeagueConfig;
use crate::play::PlayConfig;
use crate::storage::registry::RegistryConfig;
use crate::storage::replay::ReplayConfig;
use crate::trainer::TrainerConfig;
use crate::storage::wal::WalConfig;
use anyhow::{bail, Context};
use clap::Parser;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shine_agent::dqn::DqnConfig;
use shine_agent::{ActionSet, Side, Task};
use std::path::{Path, PathBuf};

/// Everything `shine-manager` can be told.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub game: GameConfig,
    pub workers: WorkersConfig,
    pub registry: RegistryConfig,
    pub stats: StatsConfig,
    pub trainer: TrainerConfig,
    pub replay: ReplayConfig,
    pub dqn: DqnConfig,
    pub wal: WalConfig,
    pub history: HistoryConfig,
    pub league: LeagueConfig,
    /// `[play]`: matches against people in the browser (`crate::play`).
    pub play: PlayConfig,
    /// `[[runs]]`: the experiments this manager trains (none: one run, `default`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunSpec>,
}

/// The name of the run a manager without `[[runs]]` trains, and the run the routes
/// without `/runs/{run}` address.
pub const DEFAULT_RUN: &str = "default";

/// One `[[runs]]` entry (or the body of `POST /api/v1/runs`): a name, a share of the
/// device, and the keys of `[game]`, `[dqn]`, `[replay]`, `[trainer]` and (its
/// exploration only) `[workers]` that differ from the manager's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// 1 to 64 of `a-z 0-9 - _`, starting with a letter or digit: it is a URL path
    /// segment and a directory name.
    pub name: String,
    /// Share of the device's train steps against the other runs' (2: twice the steps
    /// of a run with weight 1, when both may train).
    #[serde(default = "one")]
    pub weight: f64,
    /// Starts paused (no train steps; uploads answered 503 `run_paused`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub game: toml::Table,
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub dqn: toml::Table,
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub replay: toml::Table,
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub trainer: toml::Table,
    /// Only the [`EXPLORATION_KEYS`]: the rest of `[workers]` is the fleet's.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub workers: toml::Table,
}

fn one() -> f64 {
    1.0
}

/// `[trainer]` keys that belong to the device, not to a run: set in the manager's own
/// `[trainer]`.
pub const DEVICE_KEYS: [&str; 3] = ["device", "nice", "threads"];

/// `[workers]` keys a run may set for itself: how its workers explore. The others (the
/// cadences, the timeout) are the fleet's, the same for every run.
pub const EXPLORATION_KEYS: [&str; 4] = ["epsilon", "epsilon_base", "epsilon_alpha", "fleet_size"];

/// A run's exploration: one epsilon for all its workers, or its own Ape-X ladder over
/// them (`[workers]`'s keys of the same names; [`crate::fleet`] hands them out).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exploration {
    pub epsilon: Option<f64>,
    pub epsilon_base: f64,
    pub epsilon_alpha: f64,
    pub fleet_size: u32,
}

impl Exploration {
    pub fn of(w: &WorkersConfig) -> Exploration {
        Exploration { epsilon: w.epsilon, epsilon_base: w.epsilon_base, epsilon_alpha: w.epsilon_alpha, fleet_size: w.fleet_size }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(e) = self.epsilon {
            if !(0.0..=1.0).contains(&e) {
                bail!("[workers] epsilon = {e} must be in [0, 1]");
            }
        }
        if !(self.epsilon_base > 0.0 && self.epsilon_base <= 1.0 && self.epsilon_alpha.is_finite() && self.epsilon_alpha >= 0.0) {
            bail!("[workers] epsilon_base must be in (0, 1] and epsilon_alpha >= 0");
        }
        Ok(())
    }
}

/// A run's settings: the manager's sections with its overrides applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSettings {
    pub name: String,
    pub weight: f64,
    pub paused: bool,
    pub game: GameConfig,
    pub dqn: DqnConfig,
    pub replay: ReplayConfig,
    pub trainer: TrainerConfig,
    /// `[workers]`: the run's exploration (the fleet's cadences are the manager's).
    pub workers: Exploration,
}

impl RunSettings {
    pub fn action_set(&self) -> ActionSet {
        self.game.action_set().expect("validated")
    }
    pub fn side(&self) -> Side {
        self.game.side().expect("validated")
    }
    pub fn task(&self) -> Task {
        self.game.task().expect("validated")
    }
}

/// Whether `name` can be a run's name (see [`RunSpec::name`]).
pub fn valid_run_name(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    (1..=64).contains(&name.len()) && name.chars().all(ok) && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// `base` with the keys of `over` replaced; unknown keys and wrong types are errors.
fn overlay<T: Serialize + DeserializeOwned>(base: &T, over: &toml::Table, section: &str) -> anyhow::Result<T> {
    let mut v = toml::Value::try_from(base).context("serialising the manager's section")?;
    let t = v.as_table_mut().expect("a section is a table");
    for (k, x) in over {
        t.insert(k.clone(), x.clone());
    }
    v.try_into().map_err(|e: toml::de::Error| anyhow::anyhow!("[{section}]: {}", e.message()))
}

impl RunSpec {
    /// The run's settings on top of `base` (the manager's config), validated.
    pub fn resolve(&self, base: &Config) -> anyhow::Result<RunSettings> {
        let name = &self.name;
        if !valid_run_name(name) {
            bail!("run name {name:?}: use 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit");
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            bail!("run {name:?}: weight = {} must be a positive number", self.weight);
        }
        if let Some(k) = DEVICE_KEYS.iter().find(|k| self.trainer.contains_key(**k)) {
            bail!("run {name:?}: [trainer] {k} is the device's, shared by every run: set it in the manager's own [trainer]");
        }
        if let Some(k) = self.workers.keys().find(|k| !EXPLORATION_KEYS.contains(&k.as_str())) {
            bail!(
                "run {name:?}: [workers] {k} is the fleet's, shared by every run: set it in the manager's own [workers] \
                 (a run sets only {})",
                EXPLORATION_KEYS.join(", ")
            );
        }
        let ctx = |section: &str| format!("run {name:?}: {section}");
        let r = RunSettings {
            name: name.clone(),
            weight: self.weight,
            paused: self.paused,
            game: overlay(&base.game, &self.game, "game").with_context(|| ctx("[game]"))?,
            dqn: overlay(&base.dqn, &self.dqn, "dqn").with_context(|| ctx("[dqn]"))?,
            replay: overlay(&base.replay, &self.replay, "replay").with_context(|| ctx("[replay]"))?,
            trainer: overlay(&base.trainer, &self.trainer, "trainer").with_context(|| ctx("[trainer]"))?,
            workers: overlay(&base.workers, &self.workers, "workers").map(|w| Exploration::of(&w)).with_context(|| ctx("[workers]"))?,
        };
        r.workers.validate().with_context(|| format!("run {name:?}"))?;
        r.game.validate().with_context(|| format!("run {name:?}"))?;
        r.dqn.validate().with_context(|| format!("run {name:?}"))?;
        r.replay.validate().with_context(|| format!("run {name:?}"))?;
        r.trainer.validate(&r.replay).with_context(|| format!("run {name:?}"))?;
        Ok(r)
    }
}

/// `[server]`: the HTTP side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: String,
    /// Where checkpoints and published models live (created if missing).
    pub data_dir: PathBuf,
    /// Bearer token workers send with every write. Prefer `SHINE_TOKEN` to the file.
    pub token: Option<String>,
    /// Run without any token (every write accepted). Local experiments only.
    pub insecure_no_token: bool,
    /// Models, stats and metrics readable without the token.
    pub public_reads: bool,
    /// Largest experience upload body in bytes (larger: 413).
    pub max_upload_bytes: usize,
    /// Upload ids remembered for dropping retried batches.
    pub dedup_window: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "0.0.0.0:8080".into(),
            data_dir: PathBuf::from("data"),
            token: None,
            insecure_no_token: false,
            public_reads: true,
            max_upload_bytes: 32 << 20,
            dedup_window: 100_000,
        }
    }
}

/// `[game]`: what the bots learn, told to every worker at registration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GameConfig {
    /// `untouchable` (the paper's five macro-actions) or `fight`.
    pub action_set: String,
    /// Reward and episode end: `untouchable` or `fight`.
    pub task: String,
    /// The fighter the bot plays: `fox` or `marth` (the simulator only, so far).
    pub side: String,
    /// Top CPU opponent level, 1..=9.
    pub cpu_level: u8,
    /// Share of training episodes at `cpu_level`; the rest draw 1..=cpu_level.
    pub cpu_level_top_share: f64,
    /// Share of episodes played greedily at `cpu_level` as evaluation.
    pub eval_share: f64,
    /// Self-play: the run whose models play the other side ("": the scripted CPU only).
    pub opponent_run: String,
    /// With `opponent_run`: the share of training episodes still played against the
    /// scripted CPU...
    pub opponent_cpu_share: f64,
    /// ...and, of the others, the share against `opponent_run`'s newest model (the
    /// rest: one of its older kept models, drawn uniformly).
    pub opponent_latest_share: f64,
}

impl Default for GameConfig {
    fn default() -> Self {
        GameConfig {
            action_set: "untouchable".into(),
            task: "untouchable".into(),
            side: "fox".into(),
            cpu_level: 9,
            cpu_level_top_share: 0.7,
            eval_share: 0.02,
            opponent_run: String::new(),
            opponent_cpu_share: 0.2,
            opponent_latest_share: 0.5,
        }
    }
}

impl GameConfig {
    pub fn action_set(&self) -> anyhow::Result<ActionSet> {
        ActionSet::from_name(&self.action_set).with_context(|| format!("[game] action_set = {:?}: expected \"untouchable\" or \"fight\"", self.action_set))
    }
    pub fn task(&self) -> anyhow::Result<Task> {
        self.task.parse::<Task>().map_err(|e| anyhow::anyhow!("[game] task: {e}"))
    }
    pub fn side(&self) -> anyhow::Result<Side> {
        self.side.parse::<Side>().map_err(|e| anyhow::anyhow!("[game] side: {e}"))
    }
    pub fn validate(&self) -> anyhow::Result<()> {
        self.action_set()?;
        self.task()?;
        self.side()?;
        if !(1..=9).contains(&self.cpu_level) {
            bail!("[game] cpu_level = {} must be in 1..=9", self.cpu_level);
        }
        let shares = [
            ("cpu_level_top_share", self.cpu_level_top_share),
            ("eval_share", self.eval_share),
            ("opponent_cpu_share", self.opponent_cpu_share),
            ("opponent_latest_share", self.opponent_latest_share),
        ];
        for (name, v) in shares {
            if !(0.0..=1.0).contains(&v) {
                bail!("[game] {name} = {v} must be in [0, 1]");
            }
        }
        Ok(())
    }
}

/// `[workers]`: the fleet's cadences and exploration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkersConfig {
    /// A worker uploads after this many transitions...
    pub upload_every_transitions: u32,
    /// ...or after this many seconds, whichever comes first.
    pub upload_every_secs: f64,
    /// How often workers ask for a new model.
    pub model_poll_secs: f64,
    /// How often workers send a heartbeat.
    pub heartbeat_secs: f64,
    /// A worker not heard from (register, heartbeat, upload, episodes) for this long
    /// is gone: its ladder slot goes to the next worker that registers.
    pub worker_timeout_secs: f64,
    /// One epsilon for every worker instead of the ladder.
    pub epsilon: Option<f64>,
    /// Ape-X ladder `base^(1 + alpha * i / (N - 1))`: base (Ape-X: 0.4).
    pub epsilon_base: f64,
    /// Ape-X ladder: alpha (Ape-X: 7).
    pub epsilon_alpha: f64,
    /// N of the ladder. 0: the live workers (epsilons shift as the fleet grows, sent
    /// back with every heartbeat). A fleet size fixes each slot's epsilon from the
    /// start; more workers than that stretch the ladder as with 0.
    pub fleet_size: u32,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        WorkersConfig {
            upload_every_transitions: 2000,
            upload_every_secs: 5.0,
            model_poll_secs: 5.0,
            heartbeat_secs: 5.0,
            worker_timeout_secs: 30.0,
            epsilon: None,
            epsilon_base: 0.4,
            epsilon_alpha: 7.0,
            fleet_size: 0,
        }
    }
}

/// `[stats]`: the dashboard's time series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatsConfig {
    /// Seconds between samples.
    pub interval_secs: f64,
    /// Samples kept (3600 at 2 s: the last two hours).
    pub history: usize,
    /// Finished episodes kept for the reward and survival averages.
    pub recent_episodes: usize,
}

impl Default for StatsConfig {
    fn default() -> Self {
        StatsConfig { interval_secs: 2.0, history: 3600, recent_episodes: 1000 }
    }
}

impl Config {
    /// Parse a TOML file; unknown keys are errors (a typo must not silently fall back
    /// to a default).
    pub fn from_file(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing config {}", path.display()))
    }

    /// The token, if any (an empty string counts as none).
    pub fn token(&self) -> Option<&str> {
        self.server.token.as_deref().filter(|t| !t.is_empty())
    }

    /// Every value in range, and a token unless explicitly running without one.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.token().is_none() && !self.server.insecure_no_token {
            bail!(
                "refusing to start without a token: workers authenticate with it. Pass --token TOKEN \
                 (or set SHINE_TOKEN, or `token` under [server] in the config). \
                 --insecure-no-token accepts every upload from anyone: local experiments only."
            );
        }
        let s = &self.server;
        if s.max_upload_bytes < shine_agent::experience::HEADER_LEN {
            bail!("[server] max_upload_bytes = {} is smaller than an upload header", s.max_upload_bytes);
        }
        if s.dedup_window == 0 {
            bail!("[server] dedup_window must be at least 1");
        }
        if self.history.samples_per_run == 0 || self.history.episodes_per_run == 0 {
            bail!("[history] samples_per_run and episodes_per_run must be at least 1");
        }
        if self.wal.segment_mb == 0 || self.wal.segment_mb > 4096 {
            bail!("[wal] segment_mb = {} must be in 1..=4096", self.wal.segment_mb);
        }
        self.game.validate()?;
        let w = &self.workers;
        for (name, v) in [
            ("upload_every_secs", w.upload_every_secs),
            ("model_poll_secs", w.model_poll_secs),
            ("heartbeat_secs", w.heartbeat_secs),
            ("worker_timeout_secs", w.worker_timeout_secs),
        ] {
            if !(v.is_finite() && v > 0.0) {
                bail!("[workers] {name} = {v} must be a positive number of seconds");
            }
        }
        if w.upload_every_transitions == 0 || w.upload_every_transitions > shine_agent::experience::MAX_COUNT {
            bail!("[workers] upload_every_transitions must be in 1..={}", shine_agent::experience::MAX_COUNT);
        }
        Exploration::of(w).validate()?;
        if self.registry.keep_last == 0 {
            bail!("[registry] keep_last must be at least 1 (the latest model)");
        }
        let st = &self.stats;
        if !(st.interval_secs.is_finite() && st.interval_secs >= 0.05) || st.history == 0 || st.recent_episodes == 0 {
            bail!("[stats] interval_secs must be >= 0.05, history and recent_episodes at least 1");
        }
        self.dqn.validate()?;
        self.replay.validate()?;
        self.trainer.validate(&self.replay)?;
        self.league.validate()?;
        self.play.validate()?;
        self.runs()?;
        Ok(())
    }

    /// The declared runs resolved against this config, or the one run `default` with
    /// its own sections. Names must be unique.
    pub fn runs(&self) -> anyhow::Result<Vec<RunSettings>> {
        if self.runs.is_empty() {
            return RunSpec { name: DEFAULT_RUN.into(), weight: 1.0, paused: false, ..RunSpec::empty() }.resolve(self).map(|r| vec![r]);
        }
        let mut out: Vec<RunSettings> = Vec::new();
        for spec in &self.runs {
            if out.iter().any(|r| r.name == spec.name) {
                bail!("[[runs]] declares {:?} twice: names must be unique", spec.name);
            }
            out.push(spec.resolve(self)?);
        }
        for run in &out {
            check_opponent(run, &out)?;
        }
        Ok(out)
    }
}

/// Self-play pairs two runs: `run`'s `[game] opponent_run` must be one of `runs`,
/// another run playing the other side with the same action set, task and returns
/// (`n_step`, `gamma`), since a self-play worker uploads its opponent's transitions to
/// that run as they were played.
pub fn check_opponent(run: &RunSettings, runs: &[RunSettings]) -> anyhow::Result<()> {
    let name = &run.game.opponent_run;
    if name.is_empty() {
        return Ok(());
    }
    let Some(other) = runs.iter().find(|r| &r.name == name) else {
        let known: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        bail!("run {:?}: [game] opponent_run = {name:?} is not a run (runs: {known:?})", run.name);
    };
    if other.name == run.name {
        bail!("run {:?}: [game] opponent_run names the run itself; name the run that plays the other side", run.name);
    }
    if other.side() == run.side() {
        bail!("run {:?}: [game] opponent_run {name:?} plays {} as this run does; its side must be {}", run.name, other.side(), run.side().other());
    }
    let plays = |r: &RunSettings| (r.action_set(), r.task(), r.dqn.n_step, r.dqn.gamma);
    if plays(other) != plays(run) {
        bail!(
            "run {:?}: [game] opponent_run {name:?} must play the same action set and task with the same [dqn] n_step and gamma (it plays {:?}, this run {:?})",
            run.name,
            plays(other),
            plays(run)
        );
    }
    Ok(())
}

impl RunSpec {
    /// A spec that changes nothing (name empty).
    pub fn empty() -> RunSpec {
        RunSpec {
            name: String::new(),
            weight: 1.0,
            paused: false,
            game: Default::default(),
            dqn: Default::default(),
            replay: Default::default(),
            trainer: Default::default(),
            workers: Default::default(),
        }
    }
}

/// `shine-manager`: the learner service.
#[derive(Debug, Parser)]
#[command(
    name = "shine-manager",
    version,
    about = "Shine's learner service: takes gameplay uploads from workers, trains a Dueling DQN, publishes models.",
    long_about = "Shine's learner service: takes gameplay uploads from workers over HTTP, keeps the \
replay on the training device, trains a Dueling DQN, and publishes models that workers download.\n\n\
Every setting lives in a TOML file (configs/manager.toml documents each one); the flags below \
override the file, and each flag can also come from the environment variable shown. \
The token is required: run with --token (or SHINE_TOKEN), or --insecure-no-token for a local experiment.\n\n\
Stops cleanly on Ctrl-C or SIGTERM: stops accepting requests, writes a final checkpoint, exits 0. \
A restart with the same --data-dir continues from that checkpoint. Log level: RUST_LOG (default info)."
)]
// The fields' doc comments are the flags' --help text, where `[server] listen` names the
// TOML key a flag overrides, not a link.
#[allow(rustdoc::broken_intra_doc_links)]
pub struct Cli {
    /// TOML config file (see configs/manager.toml); built-in defaults without one.
    #[arg(long, short, env = "SHINE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on, e.g. 0.0.0.0:8080 ([server] listen).
    #[arg(long, env = "SHINE_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Checkpoints and published models go here ([server] data_dir).
    #[arg(long, env = "SHINE_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Bearer token that workers must send ([server] token).
    #[arg(long, env = "SHINE_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Accept writes without any token. For local experiments only.
    #[arg(long)]
    pub insecure_no_token: bool,
    /// Training device: auto (CUDA when present), cpu, cuda or cuda:N ([trainer] device).
    #[arg(long, env = "SHINE_DEVICE", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Check the configuration (every value, every [[runs]] entry resolved, as at a
    /// start) and exit: status 0 when it is valid, else 1 with the reason. Starts
    /// nothing and writes nothing.
    #[arg(long)]
    pub check_config: bool,
    /// Without a command: run the manager.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// `shine-manager COMMAND`: tools beside the service.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Print a bash script that starts N workers for this manager on GCP, AWS or Kubernetes.
    ///
    /// The script holds the files from configs/ (cloud-init, systemd unit, Kubernetes
    /// manifests) with your manager URL, token and worker count filled in.
    ///
    /// Example: shine-manager launch-script --cloud gcp --workers 8 --manager-url http://203.0.113.7:8080 --token $SHINE_TOKEN --worker-url gs://BUCKET/shine-worker > launch.sh && bash launch.sh
    LaunchScript(crate::launch::LaunchArgs),
}

impl Cli {
    /// Defaults, then the file, then flags and environment; validated.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        if let Some(v) = &self.listen {
            c.server.listen = v.clone();
        }
        if let Some(v) = &self.data_dir {
            c.server.data_dir = v.clone();
        }
        if let Some(v) = &self.token {
            c.server.token = Some(v.clone());
        }
        if self.insecure_no_token {
            c.server.insecure_no_token = true;
        }
        if let Some(v) = &self.device {
            c.trainer.device = v.clone();
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_config_parses_and_equals_the_defaults() {
        // configs/manager.toml documents every knob with its default value: if a field
        // is added or a default changes, this fails until the file says so too.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/manager.toml");
        let mut c = Config::from_file(&path).unwrap();
        assert_eq!(c.server.token, None, "the shipped file must not carry a token");
        c.server.insecure_no_token = false;
        assert_eq!(c, Config::default());
        let text = std::fs::read_to_string(&path).unwrap();
        let defaults = toml::Value::try_from(Config::default()).unwrap();
        for (section, table) in defaults.as_table().unwrap() {
            for key in table.as_table().unwrap().keys() {
                assert!(text.contains(&format!("{key} =")) || text.contains(&format!("# {key} =")), "configs/manager.toml does not document [{section}] {key}");
            }
        }
    }

    #[test]
    fn flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.toml");
        std::fs::write(&file, "[server]\nlisten = \"1.2.3.4:1\"\ndata_dir = \"/x\"\ntoken = \"file\"\n").unwrap();
        let cli = Cli::parse_from(["shine-manager", "--config", file.to_str().unwrap(), "--listen", "127.0.0.1:9", "--token", "flag"]);
        let c = cli.config().unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:9");
        assert_eq!(c.server.token.as_deref(), Some("flag"));
        assert_eq!(c.server.data_dir, PathBuf::from("/x"), "file value kept where no flag is given");
    }

    #[test]
    fn no_token_is_refused_unless_insecure() {
        let mut c = Config::default();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("--token") && err.contains("--insecure-no-token"), "{err}");
        c.server.token = Some(String::new());
        assert!(c.validate().is_err(), "an empty token is no token");
        c.server.insecure_no_token = true;
        c.validate().unwrap();
    }

    #[test]
    fn runs_take_the_manager_s_sections_and_change_only_what_they_name() {
        let text = r#"
            [dqn]
            lr = 0.001
            [replay]
            capacity = 50000
            [trainer]
            burn_in = 1000
            [[runs]]
            name = "dodge"
            [[runs]]
            name = "fight-fast"
            weight = 2.0
            game = { action_set = "fight", task = "fight" }
            dqn = { lr = 0.0005, n_step = 3 }
            workers = { epsilon = 0.1 }
        "#;
        let c: Config = toml::from_str(text).unwrap();
        let runs = c.runs().unwrap();
        assert_eq!(runs.len(), 2);
        let (a, b) = (&runs[0], &runs[1]);
        assert_eq!((a.name.as_str(), a.weight, a.dqn.lr, a.replay.capacity, a.trainer.burn_in), ("dodge", 1.0, 0.001, 50_000, 1000));
        assert_eq!(a.action_set(), ActionSet::Untouchable);
        assert_eq!((b.weight, b.dqn.lr, b.dqn.n_step, b.replay.capacity), (2.0, 0.0005, 3, 50_000));
        assert_eq!((b.action_set(), b.task()), (ActionSet::Fight, Task::Fight));
        assert_eq!(b.dqn.gamma, DqnConfig::default().gamma, "what no one names keeps its default");
        assert_eq!((a.workers.epsilon, b.workers.epsilon), (None, Some(0.1)), "a run's own exploration");
        assert_eq!((b.workers.epsilon_base, b.workers.fleet_size), (c.workers.epsilon_base, c.workers.fleet_size));
        let none = Config::default().runs().unwrap();
        assert_eq!((none.len(), none[0].name.as_str()), (1, DEFAULT_RUN), "no [[runs]]: the one run default");
    }

    #[test]
    fn the_runs_example_in_the_shipped_config_is_valid() {
        // configs/manager.toml ends with a commented [[runs]] example: uncommented, it
        // must be a working config.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/manager.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let example: String =
            text[text.find("# [[runs]]\n").expect("the example")..].lines().map(|l| format!("{}\n", l.trim_start_matches('#').trim_start())).collect();
        let c: Config = toml::from_str(&example).unwrap();
        let runs = c.runs().unwrap();
        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["dodge", "fight"]);
        assert_eq!(runs[1].action_set(), ActionSet::Fight);
    }

    #[test]
    fn the_learning_configs_are_valid() {
        // scripts/learn.sh's configs: the Untouchable run and the fight run, the same
        // learner with the fight's action set and task.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let learn = Config::from_file(&dir.join("learn.toml")).unwrap();
        let fight = Config::from_file(&dir.join("fight.toml")).unwrap();
        for c in [&learn, &fight] {
            c.runs().unwrap();
        }
        assert_eq!((learn.game.action_set().unwrap(), learn.game.task().unwrap()), (ActionSet::Untouchable, Task::Untouchable));
        assert_eq!((fight.game.action_set().unwrap(), fight.game.task().unwrap()), (ActionSet::Fight, Task::Fight));
        assert_eq!((&fight.dqn, &fight.trainer, &fight.replay), (&learn.dqn, &learn.trainer, &learn.replay), "the same learner");
        // scripts/gpu-learn.sh's: the same task and learner for a fleet and a CUDA
        // learner: the ladder (no fixed epsilon), CUDA, the replay the graph step needs.
        let gpu = Config::from_file(&dir.join("learn-gpu.toml")).unwrap();
        // Validated as gpu-learn.sh --device cpu runs it (this machine may have no GPU).
        let mut on_cpu = gpu.clone();
        on_cpu.trainer.device = "cpu".into();
        on_cpu.runs().unwrap();
        assert_eq!((gpu.game.action_set().unwrap(), gpu.game.task().unwrap()), (ActionSet::Untouchable, Task::Untouchable));
        assert_eq!((gpu.workers.epsilon, gpu.trainer.device.as_str()), (None, "cuda"));
        assert_eq!((gpu.replay.kind, gpu.replay.sampling), (crate::storage::replay::ReplayKind::Device, crate::storage::replay::Sampling::Uniform));
        assert_eq!((gpu.dqn.n_step, gpu.dqn.target_sync_every), (learn.dqn.n_step, learn.dqn.target_sync_every), "the learner's targets as learn.toml's");
    }

    /// The `.toml` files directly in `dir`, sorted.
    fn toml_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml")).collect();
        files.sort();
        files
    }

    #[test]
    fn the_test_configs_are_valid_and_leave_address_data_and_token_to_the_flags() {
        // testkit/configs: what every test that starts a manager starts it with (the
        // process fixture testkit/src/manager.rs, manager/tests/common, the browser test).
        // A key the config no longer has fails here, by name, rather than as a manager
        // that will not start in a test of something else.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/configs");
        let files = toml_files(&dir);
        assert!(files.len() >= 10, "the test configs: {files:?}");
        for path in &files {
            let mut c = Config::from_file(path).unwrap_or_else(|e| panic!("{e:#}"));
            // What each test passes itself, as flags: never in the file.
            let defaults = ServerConfig::default();
            assert_eq!(
                (&c.server.listen, &c.server.data_dir, &c.server.token),
                (&defaults.listen, &defaults.data_dir, &None),
                "{}: listen, data_dir and token are the test's flags",
                path.display()
            );
            c.server.token = Some("t".into());
            c.validate().unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        }
        // The invalid ones (manager/tests/cli.rs's --check-config cases) are refused.
        for path in toml_files(&dir.join("invalid")) {
            let checked = Config::from_file(&path).and_then(|mut c| {
                c.server.token = Some("t".into());
                c.validate()
            });
            assert!(checked.is_err(), "{} is valid", path.display());
        }
    }

    #[test]
    fn bad_runs_are_clear_errors() {
        let err = |text: &str| toml::from_str::<Config>(text).map_err(anyhow::Error::from).and_then(|c| c.runs()).unwrap_err();
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\n[[runs]]\nname = \"a\"\n"));
        assert!(e.contains("twice"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"A b\"\n"));
        assert!(e.contains("a-z"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\ntrainer = { threads = 2 }\n"));
        assert!(e.contains("device") && e.contains("manager's own [trainer]"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\ndqn = { lrr = 1.0 }\n"));
        assert!(e.contains("run \"a\"") && e.contains("lrr"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\ngame = { action_set = \"dance\" }\n"));
        assert!(e.contains("dance"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\nworkers = { upload_every_secs = 1.0 }\n"));
        assert!(e.contains("[workers] upload_every_secs is the fleet's") && e.contains("epsilon_alpha"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\nworkers = { epsilon_base = 1.5 }\n"));
        assert!(e.contains("run \"a\"") && e.contains("epsilon_base"), "{e}");
        let e = format!("{:#}", err("[[runs]]\nname = \"a\"\nweight = 0.0\n"));
        assert!(e.contains("weight"), "{e}");
        assert!(toml::from_str::<Config>("[[runs]]\nname = \"a\"\nwieght = 1.0\n").is_err(), "typos in a run are errors");
    }

    #[test]
    fn self_play_pairs_a_fox_run_with_a_marth_run_that_plays_the_same_game() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let selfplay = Config::from_file(&dir.join("selfplay.toml")).unwrap();
        let runs = selfplay.runs().unwrap();
        let pairs: Vec<(&str, Side, &str)> = runs.iter().map(|r| (r.name.as_str(), r.side(), r.game.opponent_run.as_str())).collect();
        assert_eq!(pairs, [("fox", Side::Fox, "marth"), ("marth", Side::Marth, "fox")]);
        let fight = Config::from_file(&dir.join("fight.toml")).unwrap();
        assert_eq!((&selfplay.dqn, &selfplay.trainer), (&fight.dqn, &fight.trainer), "the fight's learner on both sides");

        let err = |runs: &str| format!("{:#}", toml::from_str::<Config>(runs).map_err(anyhow::Error::from).and_then(|c| c.runs()).unwrap_err());
        let fight = "game = { action_set = \"fight\", task = \"fight\"";
        let e = err(&format!("[[runs]]\nname = \"a\"\n{fight}, opponent_run = \"b\" }}\n"));
        assert!(e.contains("opponent_run = \"b\" is not a run"), "{e}");
        let e = err(&format!("[[runs]]\nname = \"a\"\n{fight}, opponent_run = \"a\" }}\n"));
        assert!(e.contains("names the run itself"), "{e}");
        let e = err(&format!("[[runs]]\nname = \"a\"\n{fight}, opponent_run = \"b\" }}\n[[runs]]\nname = \"b\"\n{fight} }}\n"));
        assert!(e.contains("plays fox as this run does; its side must be marth"), "{e}");
        let e = err(&format!("[[runs]]\nname = \"a\"\n{fight}, opponent_run = \"b\" }}\n[[runs]]\nname = \"b\"\ngame = {{ side = \"marth\" }}\n"));
        assert!(e.contains("same action set and task"), "{e}");
        let e = err(&format!("[[runs]]\nname = \"a\"\n{fight}, opponent_run = \"b\" }}\n[[runs]]\nname = \"b\"\n{fight}, side = \"marth\" }}\ndqn = {{ n_step = 3 }}\n"));
        assert!(e.contains("n_step and gamma"), "{e}");
        let e = err(&format!("[[runs]]\nname = \"a\"\n{fight}, opponent_cpu_share = 1.5 }}\n"));
        assert!(e.contains("opponent_cpu_share = 1.5"), "{e}");
        let e = err("[[runs]]\nname = \"a\"\ngame = { side = \"falco\" }\n");
        assert!(e.contains("unknown side \"falco\""), "{e}");
    }

    #[test]
    fn typos_are_errors() {
        assert!(toml::from_str::<Config>("[server]\nlisten_addr = \"x\"\n").is_err());
        assert!(toml::from_str::<Config>("[serverr]\n").is_err());
    }
}
