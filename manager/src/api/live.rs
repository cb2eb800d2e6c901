//! Live matches (docs/api.md, "Live match"): `GET /live/{worker}` is the browsers'
//! WebSocket; `GET /workers/{id}/live` is a worker's long poll ("is anyone watching
//! me?"), `POST /workers/{id}/live` its frames. The fan-out is [`crate::dashboard::live`].

use super::workers::WorkerPath;
use super::{Access, ApiJson, Route};
use crate::error::{ApiError, ApiResult};
use crate::app_state::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use shine_agent::protocol::{LiveBatch, WatchReply};
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;

/// `{worker}` of `/live/{worker}`.
#[derive(Deserialize)]
struct LivePath {
    worker: String,
}

/// Largest frames post (600 frames with 64 Q-values each fit in it).
const LIVE_LIMIT: usize = 1 << 20;
/// Longest a worker's long poll is held open.
pub const MAX_WAIT_SECS: f64 = 30.0;

pub fn routes() -> Vec<Route> {
    vec![
        // A worker's long poll is a GET, and the worker's own: the token, as for its writes.
        Route::get("/workers/{id}/live", Access::Token, wait_watched),
        Route::post("/workers/{id}/live", Access::Token, post_frames).body_limit(LIVE_LIMIT),
        Route::get("/live/{worker}", Access::Read, browser),
    ]
}

fn known_worker(s: &AppState, id: &str) -> ApiResult<u32> {
    let unknown = || ApiError::NotFound(format!("unknown worker {id}"));
    let wid: u32 = id.parse().map_err(|_| unknown())?;
    if s.fleet.lock().expect("fleet lock").contains(wid, Instant::now()) {
        Ok(wid)
    } else {
        Err(unknown())
    }
}

#[derive(Debug, Deserialize)]
struct Wait {
    wait_secs: Option<f64>,
}

/// The worker's long poll: answered as soon as a browser watches, or after `wait_secs`
/// (at most 30) with `watch: false`. One idle connection per worker makes the live
/// view start within a round trip instead of within a heartbeat interval.
async fn wait_watched(
    State(s): State<AppState>,
    Path(WorkerPath { id }): Path<WorkerPath>,
    q: Result<Query<Wait>, QueryRejection>,
) -> ApiResult<Json<WatchReply>> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    let wid = known_worker(&s, &id)?;
    let wait = q.wait_secs.filter(|w| w.is_finite()).unwrap_or(0.0).clamp(0.0, MAX_WAIT_SECS);
    // A shutting-down manager answers at once: the worker asks again after the restart.
    let watch = tokio::select! {
        w = s.live.wait_watched(wid, Duration::from_secs_f64(wait)) => w,
        _ = s.shutdown.cancelled() => false,
    };
    Ok(Json(WatchReply { watch, watchers: s.live.watchers(wid) }))
}

/// A batch of frames from a watched worker, fanned out to its browsers. The reply
/// tells the worker whether to keep streaming.
async fn post_frames(State(s): State<AppState>, Path(WorkerPath { id }): Path<WorkerPath>, ApiJson(batch): ApiJson<LiveBatch>) -> ApiResult<Json<WatchReply>> {
    let wid = known_worker(&s, &id)?;
    batch.validate().map_err(|message| ApiError::Unprocessable { code: "bad_live_batch", message })?;
    s.fleet.lock().expect("fleet lock").touch(wid, None, 0, Instant::now());
    // Serialised once here, whatever the number of browsers.
    let text = serde_json::json!({ "type": "frames", "worker_id": wid, "batch": batch }).to_string();
    let watch = s.live.publish(wid, text.into());
    Ok(Json(WatchReply { watch, watchers: s.live.watchers(wid) }))
}

/// The browser's WebSocket. Reads follow `public_reads`; browsers cannot set headers
/// on a WebSocket, so the token may come as `?token=` (see [`Access::Read`]).
async fn browser(State(s): State<AppState>, Path(LivePath { worker: id }): Path<LivePath>, ws: WebSocketUpgrade) -> ApiResult<Response> {
    let wid = known_worker(&s, &id)?;
    Ok(ws.on_upgrade(move |socket| watch(s, wid, socket)))
}

async fn watch(s: AppState, wid: u32, mut socket: WebSocket) {
    let mut sub = s.live.subscribe(wid);
    tracing::info!(worker_id = wid, watchers = s.live.watchers(wid), "browser watching a live match");
    let hello = serde_json::json!({ "type": "hello", "worker_id": wid }).to_string();
    if socket.send(Message::Text(hello.into())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            got = sub.frames.recv() => match got {
                Ok(text) => {
                    if socket.send(Message::Text(text)).await.is_err() {
                        break;
                    }
                }
                // Fell behind: the oldest batches are gone; carry on from the oldest kept.
                Err(RecvError::Lagged(n)) => tracing::debug!(worker_id = wid, skipped = n, "slow browser skipped live batches"),
                Err(RecvError::Closed) => break,
            },
            // Browsers send nothing we need; any close or error ends the watch.
            msg = socket.recv() => match msg {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            // The manager is stopping: say goodbye properly (the dashboard reconnects).
            _ = s.shutdown.cancelled() => {
                let _ = socket.send(Message::Close(Some(CloseFrame { code: close_code::AWAY, reason: "the manager is shutting down".into() }))).await;
                break;
            }
        }
    }
    drop(sub);
    tracing::info!(worker_id = wid, watchers = s.live.watchers(wid), "browser stopped watching");
}
