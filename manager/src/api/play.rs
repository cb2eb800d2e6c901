//! Play your bot (docs/api.md, "Play"): `GET /play/{version}?client=ID` is a browser's
//! WebSocket to a match between the run's model `version` and the person at the
//! browser, played by [`crate::play`] on a thread of its own. Refusals after the
//! handshake (the browser already plays, the manager plays its most matches) come as
//! one `{"type": "refused"}` message, which a page can show; before it, the usual
//! errors (`401` without the right to read, `404` for a model not kept, `400` for a bad
//! `client`).

use super::{Access, Route, RunRef};
use crate::error::{ApiError, ApiResult};
use crate::league::{protocol, Player};
use crate::play::{self, Frame, Input, Match, Outcome, Person, Place, WallClock};
use crate::run::Run;
use crate::app_state::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;
use shine_agent::model::QNet;
use shine_agent::protocol::{LeagueOutcome, LeagueResult};
use shine_agent::{ActionSet, Task};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

pub fn routes() -> Vec<Route> {
    vec![Route::get("/play/{version}", Access::Read, play_ws)]
}

#[derive(Deserialize)]
struct VersionPath {
    version: u64,
}

#[derive(Deserialize)]
struct PlayQuery {
    /// The browser's own id (the dashboard keeps one per tab): one match at a time each.
    client: String,
}

/// A browser's id: 1 to 64 of `A-Z a-z 0-9 - _`.
fn client_ok(c: &str) -> bool {
    (1..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

async fn play_ws(
    State(s): State<AppState>,
    RunRef(run): RunRef,
    Path(VersionPath { version }): Path<VersionPath>,
    q: Result<Query<PlayQuery>, QueryRejection>,
    ws: WebSocketUpgrade,
) -> ApiResult<Response> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    if !client_ok(&q.client) {
        return Err(ApiError::BadRequest { code: "bad_query", message: "client: 1 to 64 of A-Z a-z 0-9 - _ (the page's own id)".into() });
    }
    let (_, bytes) = run.registry().get(version).ok_or_else(|| ApiError::NotFound(format!("run {:?} keeps no model version {version}", run.name())))?;
    let net = QNet::load(&bytes).map_err(|e| anyhow::anyhow!("loading model {version} of run {}: {e}", run.name()))?;
    let actions = ActionSet::from_name(&net.meta().action_set).ok_or_else(|| anyhow::anyhow!("model {version}: unknown action set {}", net.meta().action_set))?;
    let place = s.plays.take(&q.client, s.config.play.max_matches);
    let m = Match { net, actions, seed: rand::random() };
    Ok(ws.on_upgrade(move |socket| async move {
        match place {
            Ok(place) => run_match(s, run, version, m, place, socket).await,
            Err(refusal) => {
                let code = match refusal {
                    play::Refusal::AlreadyPlaying => "already_playing",
                    play::Refusal::Full(_) => "play_full",
                };
                refuse(socket, code, &refusal.to_string()).await;
            }
        }
    }))
}

async fn refuse(mut socket: WebSocket, code: &str, message: &str) {
    let text = json!({ "type": "refused", "error": { "code": code, "message": message } }).to_string();
    let _ = socket.send(Message::Text(text.into())).await;
    let _ = socket.send(Message::Close(Some(CloseFrame { code: close_code::AGAIN, reason: code.into() }))).await;
}

/// The match, from hello to result: frames out as the thread plays them, the person's
/// pads in, until the thread's [`Outcome`] (counted in the league when it counts).
async fn run_match(s: AppState, run: Arc<Run>, version: u64, m: Match, place: Place, mut socket: WebSocket) {
    let bot_side = m.bot_side();
    let hello = json!({
        "type": "hello",
        "run": run.name(),
        "model_version": version,
        "bot_side": bot_side.name(),
        "your_side": bot_side.other().name(),
        "actions": (0..m.actions.len()).map(|a| m.actions.action_name(a)).collect::<Vec<_>>(),
        "seed": m.seed,
        "fps": play::FPS,
        "stocks": play::STOCKS,
        "match_secs": s.config.play.match_secs,
        "idle_secs": s.config.play.idle_secs,
    });
    if socket.send(Message::Text(hello.to_string().into())).await.is_err() {
        return;
    }
    tracing::info!(run = run.name(), version, playing = s.plays.playing(), "a person plays a model in the browser");
    let person = Person::new();
    // Unbounded: a match is at most [play] match_secs of frames, and the thread must
    // never wait on a slow page (the game keeps its own time).
    let (tx, mut frames) = mpsc::unbounded_channel::<Frame>();
    let (cfg, p) = (s.config.play.clone(), person.clone());
    let thread = std::thread::Builder::new().name("shine-play".into()).spawn(move || {
        let outcome = play::play_browser_match(&m, &cfg, &p, &mut WallClock, &mut |f| tx.send(f).is_ok());
        (m, outcome)
    });
    let Ok(thread) = thread else {
        tracing::error!("could not start a match thread");
        return refuse(socket, "internal", "internal error").await;
    };
    loop {
        tokio::select! {
            f = frames.recv() => match f {
                Some(f) => {
                    let text = json!({ "type": "frame", "frame": f }).to_string();
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        person.leave();
                    }
                }
                None => break, // the match is over
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<Input>(&text).map_err(|e| e.to_string()).and_then(|i| i.pad()) {
                    Ok(pad) => person.hold(pad, Instant::now()),
                    Err(message) => {
                        let text = json!({ "type": "error", "error": { "code": "bad_input", "message": message } }).to_string();
                        let _ = socket.send(Message::Text(text.into())).await;
                    }
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => person.leave(),
                Some(Ok(_)) => {}
            },
            _ = s.shutdown.cancelled() => person.leave(),
        }
    }
    let joined = tokio::task::spawn_blocking(move || thread.join()).await;
    let (m, outcome) = match joined {
        Ok(Ok((m, Ok(outcome)))) => (m, outcome),
        Ok(Ok((_, Err(e)))) => {
            tracing::error!(error = %e, "a match in the browser failed");
            return refuse(socket, "internal", "internal error").await;
        }
        _ => {
            tracing::error!("a match thread panicked");
            return refuse(socket, "internal", "internal error").await;
        }
    };
    drop(place);
    let league = match count_in_league(&s, &run, version, &m, &outcome).await {
        Ok(rated) => rated,
        Err(e) => {
            tracing::error!(error = %e, "storing a person's match in the league");
            None
        }
    };
    tracing::info!(run = run.name(), version, ending = ?outcome.ending, winner = %outcome.winner, "a match in the browser ended");
    let text = json!({ "type": "result", "result": outcome, "league": league }).to_string();
    let _ = socket.send(Message::Text(text.into())).await;
    let _ = socket.send(Message::Close(Some(CloseFrame { code: close_code::NORMAL, reason: "the match is over".into() }))).await;
}

/// A match played out against a model of a fight run counts in the league as a match
/// of the people's player: stored in the history database, then applied. Its new
/// ratings, or `None` when it does not count.
async fn count_in_league(s: &AppState, run: &Run, version: u64, m: &Match, o: &Outcome) -> anyhow::Result<Option<serde_json::Value>> {
    if !o.ending.finished() || run.task() != Task::Fight {
        return Ok(None);
    }
    let outcome = match o.winner.as_str() {
        "bot" => LeagueOutcome::Win,
        "you" => LeagueOutcome::Loss,
        _ => LeagueOutcome::Draw,
    };
    let result = LeagueResult {
        match_id: 0,
        outcome,
        stocks_taken: u32::from(play::STOCKS - o.your_stocks),
        stocks_lost: u32::from(play::STOCKS - o.bot_stocks),
        damage_dealt: o.bot_damage_dealt,
        damage_taken: o.your_damage_dealt,
    };
    let model = Player::Model { run: run.name().to_string(), version };
    let (state, side) = (s.clone(), m.bot_side());
    let counted = tokio::task::spawn_blocking(move || {
        protocol::count_person(&state.league, model, side, result, |m| state.history.record_match(m), |l| state.keep_league_models(l))
    })
    .await??;
    Ok(Some(json!({ "bot": counted.a, "you": counted.b, "matches": counted.matches })))
}
