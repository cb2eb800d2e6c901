//! The arguments of `shine-worker play` and `shine-worker eval`: the policy, the
//! matches' terms both take ([`MatchArgs`]) and each one's own.

use crate::games::backend::Backend;
use crate::games::matches::PolicyKind;
use clap::{Args, ValueEnum};
use shine_agent::task::Task;
use shine_agent::Side;
use std::path::PathBuf;

/// `--task`: what is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TaskArg {
    /// Survive the minute without a hit (the paper's task): survival is reported.
    Untouchable,
    /// Fight for the minute: wins, stocks and damage are reported.
    Fight,
}

impl From<TaskArg> for Task {
    fn from(t: TaskArg) -> Task {
        match t {
            TaskArg::Untouchable => Task::Untouchable,
            TaskArg::Fight => Task::Fight,
        }
    }
}

/// `--side`: the fighter the bot plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SideArg {
    /// The side the paper's agent plays (the simulator's port 2).
    Fox,
    /// The simulator's opponent side (port 1).
    Marth,
}

impl From<SideArg> for Side {
    fn from(s: SideArg) -> Side {
        match s {
            SideArg::Fox => Side::Fox,
            SideArg::Marth => Side::Marth,
        }
    }
}

/// A model to play (`--model`, `--opponent model:...`): a file, or an `http://` or
/// `https://` address the model is downloaded from, e.g. a manager's
/// `http://MANAGER:8080/api/v1/runs/NAME/models/latest` (docs/api.md).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    File(PathBuf),
    Url(String),
}

impl std::str::FromStr for ModelSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" => Err("a model is a file or an http(s) address".into()),
            s if s.starts_with("http://") || s.starts_with("https://") => Ok(ModelSource::Url(s.to_string())),
            s if s.contains("://") => Err(format!("{s:?}: a model's address starts with http:// or https:// (or give a file)")),
            s => Ok(ModelSource::File(PathBuf::from(s))),
        }
    }
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::File(path) => write!(f, "{}", path.display()),
            ModelSource::Url(url) => f.write_str(url),
        }
    }
}

/// `--opponent`: who plays the other side, on the simulator.
#[derive(Debug, Clone, PartialEq)]
pub enum OpponentArg {
    /// `cpu:LEVEL`: the scripted CPU at LEVEL (1-9).
    Cpu(u8),
    /// `model:FILE` (or `model:URL`): a trained model of the other side, played greedily.
    Model(ModelSource),
    /// `policy:NAME`: a built-in policy (idle, random or dodge).
    Policy(PolicyKind),
}

impl std::str::FromStr for OpponentArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, value) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected cpu:LEVEL, model:FILE or policy:NAME"))?;
        match kind {
            "cpu" => match value.parse::<u8>() {
                Ok(l @ 1..=9) => Ok(OpponentArg::Cpu(l)),
                _ => Err(format!("cpu:{value}: the CPU's level is 1 to 9")),
            },
            "model" if !value.is_empty() => value.parse().map(OpponentArg::Model),
            "model" => Err("model: needs a model file, e.g. model:marth.safetensors".into()),
            "policy" => match PolicyKind::from_str(value, false) {
                Ok(PolicyKind::Cpu) | Err(_) => Err(format!("policy:{value}: expected policy:idle, policy:random or policy:dodge (the CPU is cpu:LEVEL)")),
                Ok(p) => Ok(OpponentArg::Policy(p)),
            },
            _ => Err(format!("{s:?}: expected cpu:LEVEL, model:FILE or policy:NAME")),
        }
    }
}

/// `--epsilon`: a probability.
fn parse_epsilon(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(e) if (0.0..=1.0).contains(&e) => Ok(e),
        _ => Err(format!("{s:?}: expected a chance from 0 to 1, e.g. 0.05")),
    }
}

/// The terms of the matches, which `play` and `eval` take alike: the task, the
/// fighter the bot plays and who plays the other side.
#[derive(Debug, Clone, Args)]
pub struct MatchArgs {
    /// The task the episodes are played and reported as (default: the model's, from
    /// its action set, so a fight model plays the fight task; untouchable for built-in
    /// policies).
    #[arg(long, value_enum)]
    pub task: Option<TaskArg>,
    /// CPU opponent level, 1 to 9 (the paper evaluates at 9; the same as --opponent
    /// cpu:LEVEL).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub cpu_level: u8,
    /// The fighter the bot plays (default: the model's side, the only one a model
    /// plays; fox for built-in policies). In Dolphin the bot plays Fox, except against
    /// a person (--human-port), where it plays its model's fighter.
    #[arg(long, value_enum)]
    pub side: Option<SideArg>,
    /// Who plays the other side: cpu:LEVEL (the scripted CPU; Melee's in Dolphin),
    /// model:FILE (a model trained for the other side) or policy:NAME (idle, random or
    /// dodge). In Dolphin a model or policy plays Marth on the opponent's port through
    /// a pipe of its own. Default: cpu at --cpu-level.
    #[arg(long, conflicts_with = "cpu_level")]
    pub opponent: Option<OpponentArg>,
    /// The chance that a model (the bot, and a model:FILE opponent) takes a random
    /// macro-action instead of its greedy one, 0 to 1. Default: 0.05 when a model plays
    /// a model (the simulator's only randomness is the CPU's: two greedy models would
    /// play one match over and over), 0 otherwise. Not with play --human-port.
    #[arg(long, value_parser = parse_epsilon)]
    pub epsilon: Option<f64>,
}

/// `shine-worker play`.
#[derive(Debug, Clone, Args)]
pub struct PlayArgs {
    /// Where the game runs.
    #[arg(long, value_enum, default_value = "sim")]
    pub backend: Backend,
    /// A trained model: its file (safetensors, as downloaded from the dashboard's
    /// "Bots"), or an http(s) address to download it from, e.g. a manager's
    /// http://MANAGER:8080/api/v1/models/latest; plays it greedily.
    #[arg(long, conflicts_with = "policy")]
    pub model: Option<ModelSource>,
    /// The manager's token, for a model address on a manager with public_reads = false.
    #[arg(long, env = "SHINE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A built-in policy, when no --model is given.
    #[arg(long, value_enum, default_value = "dodge")]
    pub policy: PolicyKind,
    /// With --policy cpu: the level of the CPU playing the bot's side, 1 to 9.
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub bot_level: u8,
    #[command(flatten)]
    pub terms: MatchArgs,
    /// Episodes to play (one minute each at most); with --human-port, matches (each
    /// played to its end).
    #[arg(long, default_value_t = 10)]
    pub episodes: u32,
    /// Seed of the first episode; episode i uses seed + i.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Only print the summary.
    #[arg(long)]
    pub quiet: bool,
    /// With --backend dolphin: your Melee NTSC 1.02 disc image (Shine cannot ship it).
    #[arg(long)]
    pub iso: Option<PathBuf>,
    /// With --backend dolphin: the dolphin-emu-nogui to run (default: found on PATH or in /usr/games).
    #[arg(long)]
    pub dolphin: Option<PathBuf>,
    /// With --backend dolphin: play against a person on this controller port (1-4)
    /// instead of Melee's CPU. With the GameCube controller adapter, the pad goes in the
    /// adapter's port of the same number (Dolphin reads adapter port N for game port
    /// N). Dolphin opens a window at real-time speed; the bot plays its model's fighter
    /// (Fox, or Marth); the person picks their character, presses START and picks the
    /// stage themselves before every match, and the bot waits for them as long as they
    /// take; each match is played to its end. Ctrl-C (or Esc in Dolphin's window) ends
    /// the session with a summary (docs/play-your-bot.md).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub human_port: Option<u8>,
    /// With --human-port: the bot's port (default 2, or 1 when the person is on 2).
    #[arg(long, requires = "human_port", value_parser = clap::value_parser!(u8).range(1..=4))]
    pub bot_port: Option<u8>,
    /// With --human-port: the person's controller as Dolphin names it in GCPadNew.ini's
    /// `Device =` (e.g. "evdev/0/Xbox Wireless Controller"), or "adapter" for
    /// Nintendo's GameCube controller adapter, which needs no mapping.
    #[arg(long, requires = "human_port", default_value = crate::games::versus::ADAPTER)]
    pub human_device: String,
    /// With --human-port and a standard pad: a Dolphin GCPad profile holding its button
    /// mapping (Dolphin saves them as Config/Profiles/GCPad/NAME.ini); its Device is
    /// used unless --human-device names another.
    #[arg(long, requires = "human_port")]
    pub human_profile: Option<PathBuf>,
}

/// `shine-worker eval`.
#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The model to evaluate: its file, or an http(s) address to download it from
    /// (e.g. http://MANAGER:8080/api/v1/models/latest).
    #[arg(long)]
    pub model: ModelSource,
    /// The manager's token, for a model address on a manager with public_reads = false.
    #[arg(long, env = "SHINE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Episodes to play; 200 gives an interval of about +/- 6 points.
    #[arg(long, default_value_t = 200)]
    pub episodes: u32,
    #[command(flatten)]
    pub terms: MatchArgs,
    /// Seed of the first episode.
    #[arg(long, default_value_t = 1_000_000)]
    pub seed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_a_file_or_an_http_address() {
        assert_eq!("bot.safetensors".parse(), Ok(ModelSource::File("bot.safetensors".into())));
        let url = "http://manager:8080/api/v1/runs/fight/models/latest";
        assert_eq!(url.parse(), Ok(ModelSource::Url(url.into())));
        assert_eq!(url.parse::<ModelSource>().unwrap().to_string(), url);
        assert!("ftp://manager/model".parse::<ModelSource>().unwrap_err().contains("http:// or https://"));
        assert!("".parse::<ModelSource>().is_err());
        assert_eq!(format!("model:{url}").parse(), Ok(OpponentArg::Model(ModelSource::Url(url.into()))));
    }
}
