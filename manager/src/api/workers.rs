//! Workers: `POST /workers` (register), `POST /workers/{id}/heartbeat`,
//! `GET /workers` (the dashboard's list), `POST /episodes` (finished episodes).

use super::{ApiJson, Reader, Writer};
use crate::error::{ApiError, ApiResult};
use crate::fleet::WorkerView;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use shine_agent::protocol::{EpisodesReply, EpisodesRequest, Heartbeat, HeartbeatReply, RegisterRequest, Registration, MAX_EPISODES};
use std::collections::BTreeMap;
use std::time::Instant;

pub fn router() -> Router<AppState> {
    Router::new().route("/workers", post(register).get(list)).route("/workers/{id}/heartbeat", post(heartbeat)).route("/episodes", post(episodes))
}

async fn register(State(s): State<AppState>, _: Writer, ApiJson(info): ApiJson<RegisterRequest>) -> ApiResult<(StatusCode, Json<Registration>)> {
    let host = info.host.clone();
    let (worker_id, epsilon) = s.fleet.lock().expect("fleet lock").register(info, Instant::now());
    tracing::info!(worker_id, %host, epsilon, "worker registered");
    let (g, w) = (&s.config.game, &s.config.workers);
    Ok((
        StatusCode::CREATED,
        Json(Registration {
            worker_id,
            epsilon,
            action_set: s.action_set.name().into(),
            task: s.task.name().into(),
            n_step: s.config.dqn.n_step,
            gamma: s.config.dqn.gamma,
            upload_every_transitions: w.upload_every_transitions,
            upload_every_secs: w.upload_every_secs,
            max_upload_bytes: s.config.server.max_upload_bytes as u64,
            ingest_queue_transitions: s.config.trainer.queue_capacity(),
            model_poll_secs: w.model_poll_secs,
            heartbeat_secs: w.heartbeat_secs,
            eval_share: g.eval_share,
            cpu_level: g.cpu_level,
            cpu_level_top_share: g.cpu_level_top_share,
        }),
    ))
}

async fn heartbeat(State(s): State<AppState>, _: Writer, Path(id): Path<String>, ApiJson(hb): ApiJson<Heartbeat>) -> ApiResult<Json<HeartbeatReply>> {
    let unknown = || ApiError::NotFound(format!("unknown worker {id}: register again"));
    let wid: u32 = id.parse().map_err(|_| unknown())?;
    let epsilon = s.fleet.lock().expect("fleet lock").heartbeat(wid, hb, Instant::now()).ok_or_else(unknown)?;
    Ok(Json(HeartbeatReply { epsilon, watch: s.live.watchers(wid) > 0 }))
}

#[derive(Debug, Serialize)]
struct WorkerList {
    workers: Vec<WorkerView>,
}

async fn list(State(s): State<AppState>, _: Reader) -> Json<WorkerList> {
    let workers = s.fleet.lock().expect("fleet lock").list(Instant::now());
    Json(WorkerList { workers })
}

async fn episodes(State(s): State<AppState>, _: Writer, ApiJson(body): ApiJson<EpisodesRequest>) -> ApiResult<Json<EpisodesReply>> {
    // Validate all before taking any (bad input changes nothing).
    if body.episodes.len() > MAX_EPISODES {
        return Err(ApiError::Unprocessable {
            code: "too_many_episodes",
            message: format!("{} episodes in one request; at most {MAX_EPISODES}", body.episodes.len()),
        });
    }
    if let Some((i, _)) = body.episodes.iter().enumerate().find(|(_, e)| !e.reward.is_finite()) {
        return Err(ApiError::Unprocessable { code: "not_finite", message: format!("episode {i}: reward is not a finite number") });
    }
    let n = body.episodes.len();
    // Evaluation tallies per model version, for the registry's "best".
    let mut evals: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    {
        let mut log = s.episodes.lock().expect("episodes lock");
        for e in body.episodes {
            if e.eval {
                let t = evals.entry(e.model_version).or_default();
                t.0 += 1;
                t.1 += e.survived as u64;
            }
            log.add(e);
        }
    }
    s.metrics.episodes.inc_by(n as u64);
    s.fleet.lock().expect("fleet lock").touch(body.worker_id, 0, Instant::now());
    if !evals.is_empty() {
        let registry = s.registry.clone();
        // Writes models/index.json: file I/O, off the async runtime.
        tokio::task::spawn_blocking(move || {
            for (version, (episodes, survived)) in evals {
                registry.record_eval(version, episodes, survived)?;
            }
            anyhow::Ok(())
        })
        .await
        .map_err(anyhow::Error::from)??;
    }
    Ok(Json(EpisodesReply { accepted: n as u64 }))
}
