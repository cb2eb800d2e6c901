//! Play your bot: a match on the simulator between a published model and a person at
//! a browser, at the game's 60 frames a second, on a thread of its own (never the
//! device thread: a match cannot slow training). `api::play` carries it over a
//! WebSocket: the person's pad in, every frame out.
//!
//! ```text
//! browser ─{"stick":[x,y],"buttons":[..]}─► Input (the pad held now) ─┐
//!                                                                      ▼
//!   match thread: every 1/60 s one frame: the model's macro-action (greedy, decided
//!   when its last one has played out, in a shine_agent::Seat as every side a policy
//!   plays) and the person's pad into Sim::step_both ─► Frame ─► the browser (drawn by
//!   the live view's stage)
//! ```
//!
//! The model plays its own side (its file's `side`), the person the other: a Fox model
//! meets the person's Marth, a Marth model their Fox. The match ends when a side has
//! no stock left, at `[play] match_secs`, after `[play] idle_secs` without a change in
//! the person's pad, or when the page goes (its WebSocket closes). [`Plays`] admits at
//! most `[play] max_matches` at once, one per browser.

use serde::{Deserialize, Serialize};
use shine_agent::model::QNet;
use shine_agent::policy::Greedy;
use shine_agent::{ActionSet, Observation, Seat, Side};
use shine_bridge::pad::{Button, Pad, Stick};
use shine_bridge::sim::Sim;
use shine_bridge::{Emulator, MatchSetup};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `[play]` section of `configs/manager.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlayConfig {
    /// Matches against people at once (each is a thread and a core's fraction).
    pub max_matches: usize,
    /// A match ends after this long without a change in the person's pad.
    pub idle_secs: f64,
    /// The match's clock: it ends after this long (Melee's default, 8 minutes).
    pub match_secs: f64,
}

impl Default for PlayConfig {
    fn default() -> Self {
        PlayConfig { max_matches: 2, idle_secs: 60.0, match_secs: 480.0 }
    }
}

impl PlayConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.max_matches > 64 {
            anyhow::bail!("[play] max_matches = {} is over 64 (each match is a thread playing in real time)", self.max_matches);
        }
        for (key, v) in [("idle_secs", self.idle_secs), ("match_secs", self.match_secs)] {
            if !(v.is_finite() && (1.0..=3600.0).contains(&v)) {
                anyhow::bail!("[play] {key} = {v} must be between 1 and 3600 seconds");
            }
        }
        Ok(())
    }
}

/// Frames a second: the game's own pace.
pub const FPS: f64 = 60.0;

/// Stocks each side starts with.
pub const STOCKS: u8 = 4;

/// The buttons a browser may press, by the names its messages use.
pub const BUTTONS: [(&str, Button); 8] =
    [("a", Button::A), ("b", Button::B), ("x", Button::X), ("y", Button::Y), ("z", Button::Z), ("l", Button::L), ("r", Button::R), ("start", Button::Start)];

/// What the browser sends: the pad held now (the stick on Melee's `-1..1`, up
/// positive; the buttons by [`BUTTONS`]' names). L and R are pressed all the way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[serde(default)]
    pub stick: [f32; 2],
    #[serde(default)]
    pub buttons: Vec<String>,
}

impl Input {
    /// The pad it holds, or why it is not one.
    pub fn pad(&self) -> Result<Pad, String> {
        let [x, y] = self.stick;
        if !(x.is_finite() && y.is_finite() && x.abs() <= 1.0 && y.abs() <= 1.0) {
            return Err(format!("stick {:?}: each axis is a number in -1..1", self.stick));
        }
        let mut pad = Pad { main: Stick::new(0.5 + 0.5 * x, 0.5 + 0.5 * y), ..Pad::NEUTRAL };
        for name in &self.buttons {
            let Some((_, b)) = BUTTONS.iter().find(|(n, _)| n == name) else {
                return Err(format!("button {name:?}: the buttons are {}", BUTTONS.map(|(n, _)| n).join(", ")));
            };
            pad = pad.with(*b);
            match b {
                Button::L => pad.l = 1.0,
                Button::R => pad.r = 1.0,
                _ => {}
            }
        }
        Ok(pad)
    }

    /// The pad as the browser would send it: what a frame reports as applied.
    pub fn of(pad: &Pad) -> Input {
        let (x, y) = pad.main.to_melee();
        Input { stick: [x, y], buttons: BUTTONS.iter().filter(|(_, b)| pad.pressed(*b)).map(|(n, _)| n.to_string()).collect() }
    }
}

/// One side of a frame, as the live view draws it (`agent::protocol::LivePlayer`).
pub type Fighter = shine_agent::protocol::LivePlayer;

/// One frame of a match, as sent to the browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// Frames since the match began (the first is 1).
    pub frame: u64,
    /// The bot, then the person (the live view's `agent` and `opponent`).
    pub agent: Fighter,
    pub opponent: Fighter,
    /// The person's pad this frame ran on.
    pub pad: Input,
    /// The bot's macro-action in force.
    pub action: u32,
    /// On a frame where the bot decided: the 27 floats it decided on (read after the
    /// frame before) and its Q-values; its action is their argmax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<Vec<f32>>,
}

/// Why a match ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// A side has no stock left.
    Stocks,
    /// The match's clock ran out.
    Time,
    /// No change in the person's pad for `[play] idle_secs`.
    Idle,
    /// The page went (its WebSocket closed).
    Closed,
}

impl Ending {
    /// Whether the match was played out: its result counts (in the league, for a
    /// model of a fight run). An abandoned match has no result worth rating.
    pub fn finished(self) -> bool {
        matches!(self, Ending::Stocks | Ending::Time)
    }
}

/// How a match went, from both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub ending: Ending,
    /// `bot`, `you` or `draw`: more stocks left wins, then less damage taken.
    pub winner: String,
    pub frames: u64,
    pub bot_stocks: u8,
    pub your_stocks: u8,
    /// Percent dealt over the whole match (every hit counted, across stocks).
    pub bot_damage_dealt: f64,
    pub your_damage_dealt: f64,
}

/// A match to play: the model and the match's seed.
pub struct Match {
    pub net: QNet,
    pub actions: ActionSet,
    pub seed: u64,
}

impl Match {
    /// The model's side, and so the person's the other one.
    pub fn bot_side(&self) -> Side {
        self.net.meta().side
    }

    /// The simulator's match: Fox on the agent's port, Marth on the opponent's,
    /// whoever plays them.
    pub fn setup() -> MatchSetup {
        MatchSetup { stocks: STOCKS, ..MatchSetup::default() }
    }
}

/// The person's side of a running match: the pad they hold, when it last changed,
/// and whether the page is gone.
#[derive(Default)]
pub struct Person {
    held: Mutex<(Pad, Option<Instant>)>,
    gone: AtomicBool,
}

impl Person {
    pub fn new() -> Arc<Person> {
        Arc::new(Person { held: Mutex::new((Pad::NEUTRAL, None)), gone: AtomicBool::new(false) })
    }
    /// The page sent a pad.
    pub fn hold(&self, pad: Pad, now: Instant) {
        let mut h = self.held.lock().expect("play lock");
        if h.0 != pad || h.1.is_none() {
            *h = (pad, Some(now));
        }
    }
    /// The page went.
    pub fn leave(&self) {
        self.gone.store(true, Relaxed);
    }
    fn now_held(&self) -> (Pad, Option<Instant>) {
        *self.held.lock().expect("play lock")
    }
}

/// The simulator's match, its fighters driven by the bot's pads and the person's, the
/// bot in its seat: `net` choosing greedily among `actions`, reading the match from its
/// side (its opponent's 13 floats first). What [`play_browser_match`] plays and
/// [`check`] replays.
struct Board {
    side: Side,
    sim: Sim,
    bot: Seat<Greedy>,
}

impl Board {
    fn new(net: &QNet, actions: ActionSet, seed: u64) -> anyhow::Result<Board> {
        let game = Match::setup();
        let side = net.meta().side;
        let view = side.view(game);
        let sim = Sim::try_new(game, seed)?;
        // The greedy policy draws nothing: the seat's random stream goes unused.
        let mut bot = Seat::new(Greedy::new(net.clone()), actions, view, 0);
        bot.restart(view, sim.ram())?;
        Ok(Board { side, sim, bot })
    }

    /// The state after the last frame.
    fn obs(&self) -> &Observation {
        self.bot.observation().expect("read since the start")
    }

    /// The bot's greedy choice on the state after the last frame, its macro-action
    /// played from the next frame on: the action and its Q-values.
    fn decide(&mut self) -> (usize, &[f32]) {
        let action = self.bot.decide();
        (action, self.bot.policy().q_values())
    }

    /// One frame: the bot's macro-action in play on the bot's fighter, `you` on the
    /// other; the state after it.
    fn step(&mut self, you: &Pad) -> anyhow::Result<&Observation> {
        let bot = self.bot.next_pad();
        let (fox, marth) = match self.side {
            Side::Fox => (&bot, you),
            Side::Marth => (you, &bot),
        };
        self.sim.step_both(fox, marth)?;
        self.bot.observe(self.sim.ram())?;
        Ok(self.obs())
    }
}

/// Plays `m` against `person` at 60 frames a second of `clock`, handing every frame to
/// `send` (false: nobody listens any more, the match ends as [`Ending::Closed`]).
/// Blocking: run it on a thread of its own.
pub fn play_browser_match(m: &Match, cfg: &PlayConfig, person: &Person, clock: &mut dyn Clock, send: &mut dyn FnMut(Frame) -> bool) -> anyhow::Result<Outcome> {
    let mut board = Board::new(&m.net, m.actions, m.seed)?;
    let mut action = 0usize;
    let started = clock.now();
    let (mut bot_dealt, mut your_dealt) = (0.0f64, 0.0f64);
    let limit = (cfg.match_secs * FPS) as u64;
    let mut frame = 0u64;
    let ending = loop {
        if person.gone.load(Relaxed) {
            break Ending::Closed;
        }
        if frame >= limit {
            break Ending::Time;
        }
        let (pad, changed) = person.now_held();
        if clock.now().saturating_duration_since(changed.unwrap_or(started)) >= Duration::from_secs_f64(cfg.idle_secs) {
            break Ending::Idle;
        }
        // The bot decides when its last macro-action has played out, as a worker does.
        let mut decided = None;
        if board.bot.due() {
            let state = board.obs().state.to_vec();
            let (a, q) = board.decide();
            action = a;
            decided = Some((state, q.to_vec()));
        }
        let before = (board.obs().agent.percent, board.obs().opponent.percent);
        let obs = board.step(&pad)?;
        // Damage dealt: every rise of the other side's percent (a lost stock resets it).
        your_dealt += f64::from(obs.agent.percent.saturating_sub(before.0));
        bot_dealt += f64::from(obs.opponent.percent.saturating_sub(before.1));
        frame += 1;
        let (state, q) = decided.map_or((None, None), |(s, q)| (Some(s), Some(q)));
        let out = Frame { frame, agent: Fighter::of(&obs.agent), opponent: Fighter::of(&obs.opponent), pad: Input::of(&pad), action: action as u32, state, q };
        let over = obs.agent.stocks == 0 || obs.opponent.stocks == 0;
        if !send(out) {
            break Ending::Closed;
        }
        if over {
            break Ending::Stocks;
        }
        clock.sleep_until(started + Duration::from_secs_f64(frame as f64 / FPS));
    };
    let (bot_stocks, your_stocks) = (board.obs().agent.stocks, board.obs().opponent.stocks);
    let winner = winner(bot_stocks, your_stocks, bot_dealt, your_dealt).into();
    Ok(Outcome { ending, winner, frames: frame, bot_stocks, your_stocks, bot_damage_dealt: bot_dealt, your_damage_dealt: your_dealt })
}

/// Who won: more stocks left, then more damage dealt (`bot`, `you` or `draw`), as the
/// league's results are judged.
pub fn winner(bot_stocks: u8, your_stocks: u8, bot_dealt: f64, your_dealt: f64) -> &'static str {
    use std::cmp::Ordering::*;
    match (bot_stocks.cmp(&your_stocks), bot_dealt.total_cmp(&your_dealt)) {
        (Greater, _) | (Equal, Greater) => "bot",
        (Less, _) | (Equal, Less) => "you",
        (Equal, Equal) => "draw",
    }
}

/// Checks a match's `frames` (from its first) against the simulator: the same seed,
/// the person's pads and the bot's macro-actions as the frames say them, must give the
/// same fighters frame by frame, and every decision must be `net`'s greedy choice on
/// the state streamed, which must be the bot's own. `Err` names the first frame that
/// differs. (The browser test checks a match the dashboard played with it:
/// `examples/play_check.rs`.)
pub fn check(net: &QNet, actions: ActionSet, seed: u64, frames: &[Frame]) -> Result<(), String> {
    let mut board = Board::new(net, actions, seed).map_err(|e| e.to_string())?;
    for (i, f) in frames.iter().enumerate() {
        let n = f.frame;
        if n != i as u64 + 1 {
            return Err(format!("frame {n} where frame {} was due: frames are missing", i + 1));
        }
        if let Some(state) = &f.state {
            if state.as_slice() != board.obs().state.as_slice() {
                return Err(format!("frame {n}: the state streamed is not the bot's"));
            }
            let (greedy, q) = board.decide();
            if f.action as usize != greedy || f.q.as_deref() != Some(q) {
                return Err(format!("frame {n}: action {} with Q {:?}, where the model's greedy choice is {greedy} with Q {q:?}", f.action, f.q));
            }
        } else if board.bot.due() {
            return Err(format!("frame {n}: the bot's macro-action {} ended without a new decision", f.action));
        }
        let you = f.pad.pad().map_err(|e| format!("frame {n}: {e}"))?;
        let obs = board.step(&you).map_err(|e| e.to_string())?;
        let (bot_now, you_now) = (Fighter::of(&obs.agent), Fighter::of(&obs.opponent));
        if f.agent != bot_now || f.opponent != you_now {
            return Err(format!("frame {n}: streamed bot {:?} and you {:?}, the simulator bot {bot_now:?} and you {you_now:?}", f.agent, f.opponent));
        }
    }
    Ok(())
}

/// Time for [`play_browser_match`]: the wall clock, or (tests) one that only moves when asked.
pub trait Clock {
    fn now(&self) -> Instant;
    fn sleep_until(&mut self, t: Instant);
}

/// The real clock: a frame every 1/60 s.
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep_until(&mut self, t: Instant) {
        let now = Instant::now();
        if t > now {
            std::thread::sleep(t - now);
        }
    }
}

/// Why a match cannot start now.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Refusal {
    #[error("this browser is already playing a match: finish it (or close its page) first")]
    AlreadyPlaying,
    #[error("{0} matches are being played, the most this manager plays at once ([play] max_matches): try again in a minute")]
    Full(usize),
}

/// The matches being played, by the browsers playing them.
#[derive(Default)]
pub struct Plays {
    clients: Mutex<HashSet<String>>,
}

/// A place in [`Plays`], given back when dropped (the match ended, however).
pub struct Place {
    plays: Arc<Plays>,
    client: String,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.plays.clients.lock().expect("plays lock").remove(&self.client);
    }
}

impl Plays {
    /// A place for browser `client`, unless it already plays or `max` matches are on.
    pub fn take(self: &Arc<Self>, client: &str, max: usize) -> Result<Place, Refusal> {
        let mut on = self.clients.lock().expect("plays lock");
        if on.contains(client) {
            return Err(Refusal::AlreadyPlaying);
        }
        if on.len() >= max {
            return Err(Refusal::Full(on.len()));
        }
        on.insert(client.to_string());
        Ok(Place { plays: self.clone(), client: client.to_string() })
    }

    /// Matches being played.
    pub fn playing(&self) -> usize {
        self.clients.lock().expect("plays lock").len()
    }
}

#[cfg(test)]
mod tests;
