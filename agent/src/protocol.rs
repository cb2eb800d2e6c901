//! The JSON messages between `shine-worker` and `shine-manager` (`docs/api.md`), defined
//! once and used by both binaries, like the upload format ([`crate::experience`]) and
//! the model file ([`crate::model`]).
//!
//! The manager reads what workers send leniently (fields a worker may omit carry
//! `#[serde(default)]`, unknown fields are ignored), so an older or newer worker still
//! registers; `docs/api.md` says which fields are optional. The test at the bottom
//! parses every JSON example of `docs/api.md` into these types and writes it back, so
//! the doc and the code cannot disagree on a field name or type.

use serde::{Deserialize, Serialize};

/// `POST /api/v1/workers` request: what a worker says about itself. Every field is
/// optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegisterRequest {
    #[serde(default)]
    pub host: String,
    /// `sim` or `dolphin`.
    #[serde(default)]
    pub backend: String,
    /// Environments the worker plays at once.
    #[serde(default)]
    pub envs: u32,
    /// The worker's version (`CARGO_PKG_VERSION`).
    #[serde(default)]
    pub version: String,
}

/// `POST /api/v1/workers` response (`201`): who the worker is and how to behave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub worker_id: u32,
    /// The run the worker joined: its uploads, episodes and model downloads go under
    /// `/api/v1/runs/{run}/` (empty from a manager without runs: the routes without).
    #[serde(default)]
    pub run: String,
    /// Exploration rate (Ape-X ladder); heartbeats may change it.
    pub epsilon: f64,
    /// `shine_agent::ActionSet` name.
    pub action_set: String,
    /// `shine_agent::Task` name.
    pub task: String,
    /// `shine_agent::Side` name: the fighter the run's bot plays ("fox" from a manager
    /// that predates sides).
    #[serde(default = "fox")]
    pub side: String,
    /// Steps summed into each transition's reward.
    pub n_step: u8,
    pub gamma: f64,
    /// Upload a batch at this many transitions...
    pub upload_every_transitions: u32,
    /// ...or after this many seconds, whichever comes first.
    pub upload_every_secs: f64,
    /// The largest upload body the manager takes (its `[server] max_upload_bytes`; 0:
    /// not said). A worker whose uploads the manager answers "busy" makes its batches
    /// larger, never past this.
    #[serde(default)]
    pub max_upload_bytes: u64,
    /// Transitions the manager's ingest queue holds (0: not said): a batch never grows
    /// past it, so the queue keeps taking fresh data in small steps.
    #[serde(default)]
    pub ingest_queue_transitions: u64,
    pub model_poll_secs: f64,
    pub heartbeat_secs: f64,
    /// Share of episodes played greedily at `cpu_level` for evaluation.
    pub eval_share: f64,
    /// The top CPU level...
    pub cpu_level: u8,
    /// ...and the share of training episodes played at it (the rest: uniform 1..level).
    pub cpu_level_top_share: f64,
    /// Self-play: who plays the other side, when the run has an opponent run (absent or
    /// null: the scripted CPU always).
    #[serde(default)]
    pub selfplay: Option<SelfPlay>,
    /// Share of the worker's time for league matches (`POST /api/v1/league/matches`);
    /// 0 (or absent): none.
    #[serde(default)]
    pub league_share: f64,
}

/// A self-play run's opponents (`[game] opponent_run` and its shares).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfPlay {
    /// The run whose models play the other side; their transitions are uploaded to it.
    pub opponent_run: String,
    /// Share of training episodes against the scripted CPU instead.
    pub cpu_share: f64,
    /// Of the others, the share against the opponent run's newest model (the rest: one
    /// of its older kept models, uniformly).
    pub latest_share: f64,
}

/// `POST /api/v1/league/matches` answer: a league match to play on the simulator as
/// `shine-worker eval` plays it, `a` (a model, on its side) against `b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeagueMatch {
    pub match_id: u64,
    pub seed: u64,
    pub a: LeaguePlayer,
    pub b: LeaguePlayer,
}

/// One side of a league match: a run's model (its file at `url`, a path on the
/// manager), or the scripted CPU at a level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LeaguePlayer {
    Model { run: String, version: u64, side: String, url: String },
    Cpu { cpu: u8 },
}

/// A league match's result from `a`'s side (`POST /api/v1/league/results`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeagueResult {
    pub match_id: u64,
    pub outcome: LeagueOutcome,
    pub stocks_taken: u32,
    pub stocks_lost: u32,
    /// Percent, summed over the opponent's stocks.
    pub damage_dealt: f64,
    pub damage_taken: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeagueOutcome {
    Win,
    Draw,
    Loss,
}

/// The side of a registration that does not name one.
fn fox() -> String {
    crate::Side::Fox.name().into()
}

/// `POST /api/v1/workers/{id}/heartbeat` request: the worker's own counters. Every
/// field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// Game frames played since the worker started.
    #[serde(default)]
    pub frames: u64,
    /// Frames per second since the previous heartbeat.
    #[serde(default)]
    pub env_fps: f64,
    /// Frames the emulator ran without a decision from the bot (Dolphin).
    #[serde(default)]
    pub skipped_frames: u64,
    #[serde(default)]
    pub episodes: u64,
    /// Episodes cut short because the game ran on while the bot did not decide (a
    /// paused worker on Dolphin); they are not in `episodes`.
    #[serde(default)]
    pub episodes_cut: u64,
    /// The model the worker plays with.
    #[serde(default)]
    pub model_version: u64,
    /// Batches waiting in the worker's spool.
    #[serde(default)]
    pub spooled_batches: u64,
    /// Environments playing now (0: not said; the registration's `envs` then holds).
    #[serde(default)]
    pub envs_active: u32,
    /// The worker runs `--envs auto` and chose `envs_active` itself.
    #[serde(default)]
    pub envs_auto: bool,
    /// Why that many environments, in words (what `--envs auto` measured).
    #[serde(default)]
    pub envs_reason: String,
}

/// `POST /api/v1/workers/{id}/heartbeat` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Use this exploration rate from now on.
    pub epsilon: f64,
    /// A browser watches this worker's live match: send live frames.
    #[serde(default)]
    pub watch: bool,
}

/// One finished episode, for the dashboard's curves and the registry's evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpisodeReport {
    pub frames: u32,
    /// The episode's summed reward (must be finite).
    pub reward: f64,
    /// Played the full minute (ended by the time limit).
    pub survived: bool,
    /// A greedy evaluation episode at the top CPU level.
    #[serde(default)]
    pub eval: bool,
    #[serde(default)]
    pub cpu_level: u8,
    /// The model that played it.
    #[serde(default)]
    pub model_version: u64,
}

/// `POST /api/v1/episodes` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodesRequest {
    #[serde(default)]
    pub worker_id: u32,
    pub episodes: Vec<EpisodeReport>,
}

/// Most episodes one `POST /api/v1/episodes` may carry (a worker reports every few
/// seconds).
pub const MAX_EPISODES: usize = 10_000;

/// `POST /api/v1/episodes` response.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpisodesReply {
    /// Episodes taken (all of the request's).
    pub accepted: u64,
}

/// `POST /api/v1/experience` response: `202` for a new batch, `200` for a repeat.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UploadReply {
    /// Transitions taken (0 for a repeat).
    pub accepted: u64,
    /// The `upload_id` was accepted before: nothing was added.
    #[serde(default)]
    pub duplicate: bool,
}

/// One player in a live frame.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LivePlayer {
    pub x: f32,
    pub y: f32,
    /// +1 facing right, -1 facing left.
    pub facing: f32,
    /// Melee's action-state id (`None`: no fighter, e.g. between stocks).
    pub action: Option<u32>,
    /// `shine_bridge::melee::action_name` of it.
    #[serde(default)]
    pub action_name: String,
    pub percent: f32,
    pub stocks: u8,
}

impl LivePlayer {
    /// What the live view shows of a player the state reader saw: facing as +1 or -1,
    /// the action state named.
    pub fn of(p: &crate::state::PlayerFacts) -> LivePlayer {
        LivePlayer {
            x: p.x,
            y: p.y,
            facing: if p.facing < 0.0 { -1.0 } else { 1.0 },
            action: p.action,
            action_name: p.action.map_or("None", shine_bridge::melee::action_name).to_string(),
            percent: f32::from(p.percent),
            stocks: p.stocks,
        }
    }
}

/// One game frame of the watched environment, with the bot's decision in force.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveFrame {
    /// The game's frame counter.
    pub frame: u32,
    pub agent: LivePlayer,
    pub opponent: LivePlayer,
    /// The macro-action the bot chose (index into the batch's `actions`).
    pub action: u32,
    /// Q-values of every action for the state it chose from (sent for exploratory
    /// random actions too).
    pub q: Vec<f32>,
    /// The action was a random (epsilon) one, not the argmax.
    #[serde(default)]
    pub explored: bool,
}

/// `POST /api/v1/workers/{id}/live` request: consecutive frames of environment 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveBatch {
    /// Names of the action set's macro-actions, in index order.
    #[serde(default)]
    pub actions: Vec<String>,
    /// The model playing, the episode's opponent level, and whether it is evaluation.
    #[serde(default)]
    pub model_version: u64,
    #[serde(default)]
    pub cpu_level: u8,
    #[serde(default)]
    pub eval: bool,
    /// Consecutive frames, oldest first.
    pub frames: Vec<LiveFrame>,
}

/// Most frames in one live post (10 s of game time; a worker sends ~6).
pub const MAX_LIVE_FRAMES: usize = 600;
/// Most actions (and Q-values) a live frame may carry.
pub const MAX_LIVE_ACTIONS: usize = 64;
/// Longest action name (of a macro-action or an action state) in a live post.
pub const MAX_NAME_BYTES: usize = 64;

impl LiveBatch {
    /// The bounds a browser relies on; `Err` names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.frames.len() > MAX_LIVE_FRAMES {
            return Err(format!("{} frames in one post; at most {MAX_LIVE_FRAMES}", self.frames.len()));
        }
        if self.actions.len() > MAX_LIVE_ACTIONS || self.actions.iter().any(|a| a.len() > MAX_NAME_BYTES) {
            return Err(format!("at most {MAX_LIVE_ACTIONS} action names of at most {MAX_NAME_BYTES} bytes"));
        }
        for (i, f) in self.frames.iter().enumerate() {
            if f.q.len() > MAX_LIVE_ACTIONS {
                return Err(format!("frame {i}: {} Q-values; at most {MAX_LIVE_ACTIONS}", f.q.len()));
            }
            let numbers = [f.agent.x, f.agent.y, f.agent.facing, f.agent.percent, f.opponent.x, f.opponent.y, f.opponent.facing, f.opponent.percent];
            if numbers.iter().chain(&f.q).any(|v| !v.is_finite()) {
                return Err(format!("frame {i}: a number is not finite"));
            }
            if f.agent.action_name.len() > MAX_NAME_BYTES || f.opponent.action_name.len() > MAX_NAME_BYTES {
                return Err(format!("frame {i}: an action name is longer than {MAX_NAME_BYTES} bytes"));
            }
        }
        Ok(())
    }
}

/// `GET` and `POST /api/v1/workers/{id}/live` response: whether a browser watches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WatchReply {
    pub watch: bool,
    #[serde(default)]
    pub watchers: usize,
}

/// Every error response's body: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable, machine-readable (`bad_magic`, `busy`, ...).
    pub code: String,
    /// For people.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::Value;

    const API_DOC: &str = include_str!("../../docs/api.md");

    /// The JSON blocks and inline `{ ... }` examples that follow `heading` in docs/api.md.
    fn doc_section(heading: &str) -> &'static str {
        let start = API_DOC.find(heading).unwrap_or_else(|| panic!("docs/api.md has no {heading:?}"));
        let rest = &API_DOC[start + heading.len()..];
        &rest[..rest.find("\n#").unwrap_or(rest.len())]
    }

    /// Every JSON object in `text` (fenced blocks and inline code), in order.
    fn json_objects(text: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            // Find the matching brace, then try to parse what lies between.
            let mut depth = 0usize;
            let mut end = None;
            for (i, c) in rest[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(open + i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&rest[open..end]) {
                out.push(v);
                rest = &rest[end..];
            } else {
                rest = &rest[open + 1..];
            }
        }
        out
    }

    /// The example parses as `T` and `T` writes back exactly the example's fields.
    fn round_trips<T: DeserializeOwned + Serialize>(example: &Value) {
        let parsed: T = serde_json::from_value(example.clone()).unwrap_or_else(|e| panic!("{e}: {example}"));
        let back = serde_json::to_value(&parsed).unwrap();
        assert_eq!(keys(&back), keys(example), "fields of {} and of the docs/api.md example differ", std::any::type_name::<T>());
    }

    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
        k.sort();
        k
    }

    fn find(section: &str, key: &str) -> Value {
        json_objects(doc_section(section)).into_iter().find(|v| v.get(key).is_some()).unwrap_or_else(|| panic!("no example with {key:?} under {section:?}"))
    }

    #[test]
    fn every_message_in_the_api_doc_is_exactly_a_protocol_type() {
        round_trips::<RegisterRequest>(&find("### `POST /api/v1/workers` (token)", "host"));
        round_trips::<Registration>(&find("### `POST /api/v1/workers` (token)", "worker_id"));
        round_trips::<Heartbeat>(&find("### `POST /api/v1/workers/{id}/heartbeat`", "frames"));
        round_trips::<HeartbeatReply>(&find("### `POST /api/v1/workers/{id}/heartbeat`", "epsilon"));
        let episodes = find("### `POST /api/v1/episodes`", "episodes");
        round_trips::<EpisodesRequest>(&episodes);
        round_trips::<EpisodeReport>(&episodes["episodes"][0]);
        round_trips::<EpisodesReply>(&find("### `POST /api/v1/episodes`", "accepted"));
        round_trips::<UploadReply>(&find("### `POST /api/v1/experience`", "duplicate"));
        round_trips::<WatchReply>(&find("### `GET /api/v1/workers/{id}/live", "watchers"));
        let live = find("### `POST /api/v1/workers/{id}/live`", "frames");
        round_trips::<LiveBatch>(&live);
        round_trips::<LiveFrame>(&live["frames"][0]);
        round_trips::<LivePlayer>(&live["frames"][0]["agent"]);
        round_trips::<ErrorBody>(&find("Errors always have this body", "error"));
        assert!(serde_json::from_value::<LiveBatch>(live).unwrap().validate().is_ok());
    }

    #[test]
    fn optional_fields_may_be_left_out_and_required_ones_may_not() {
        assert_eq!(serde_json::from_str::<Heartbeat>("{}").unwrap(), Heartbeat::default());
        assert_eq!(serde_json::from_str::<RegisterRequest>("{}").unwrap(), RegisterRequest::default());
        let e: EpisodeReport = serde_json::from_str(r#"{"frames": 10, "reward": 1.5, "survived": false}"#).unwrap();
        assert_eq!((e.eval, e.cpu_level, e.model_version), (false, 0, 0));
        assert!(serde_json::from_str::<EpisodeReport>(r#"{"frames": 10, "survived": false}"#).is_err(), "reward is required");
        assert!(!serde_json::from_str::<HeartbeatReply>(r#"{"epsilon": 0.1}"#).unwrap().watch, "watch defaults to false");
    }

    #[test]
    fn live_batches_out_of_bounds_are_refused_with_the_reason() {
        let frame = LiveFrame { q: vec![0.0; 5], ..Default::default() };
        let ok = LiveBatch { actions: vec!["nothing".into()], frames: vec![frame.clone(); MAX_LIVE_FRAMES], ..Default::default() };
        assert_eq!(ok.validate(), Ok(()));
        let long = LiveBatch { frames: vec![frame.clone(); MAX_LIVE_FRAMES + 1], ..ok.clone() };
        assert!(long.validate().unwrap_err().contains("601 frames"));
        let mut nan = ok.clone();
        nan.frames[3].q[1] = f32::NAN;
        assert!(nan.validate().unwrap_err().contains("frame 3"));
        let mut named = ok;
        named.frames[0].agent.action_name = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(named.validate().unwrap_err().contains("longer than"));
    }
}
