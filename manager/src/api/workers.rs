//! Workers: `POST /workers` (register), `POST /workers/{id}/heartbeat`,
//! `GET /workers` (the dashboard's list), `POST /episodes` (finished episodes).
//!
//! Registration under `/runs/{run}` joins that run; `POST /api/v1/workers` joins the
//! run the manager assigns ([`assign`]).

use super::{Access, ApiJson, Route, RunName, RunRef};
use crate::error::{ApiError, ApiResult};
use crate::history::Record;
use crate::run::Run;
use crate::app_state::AppState;
use crate::dashboard::views::WorkerList;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use shine_agent::protocol::{EpisodesReply, EpisodesRequest, Heartbeat, HeartbeatReply, RegisterRequest, Registration, SelfPlay, MAX_EPISODES};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/workers", Access::Token, register),
        Route::get("/workers", Access::Read, list),
        Route::post("/workers/{id}/heartbeat", Access::Token, heartbeat),
        Route::post("/episodes", Access::Token, episodes),
    ]
}

/// The run a worker without `--run` joins: among the runs not paused (all of them if
/// every one is), the one with the fewest registered workers per unit of weight; on a
/// tie, the one with the fewest transitions inserted; then by name.
pub fn assign(runs: &[Arc<Run>], workers_in: impl Fn(&str) -> usize) -> Option<Arc<Run>> {
    let active: Vec<&Arc<Run>> = runs.iter().filter(|r| !r.is_paused()).collect();
    let pool = if active.is_empty() { runs.iter().collect() } else { active };
    let key = |r: &Arc<Run>| (workers_in(r.name()) as f64 / r.settings().weight, r.stats().transitions_inserted);
    pool.into_iter()
        .min_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1)).then(a.name().cmp(b.name()))
        })
        .cloned()
}

async fn register(State(s): State<AppState>, RunName(named): RunName, ApiJson(info): ApiJson<RegisterRequest>) -> ApiResult<(StatusCode, Json<Registration>)> {
    let host = info.host.clone();
    let run = match named {
        Some(name) => s.run(&name)?,
        None => {
            let runs = s.all_runs();
            let fleet = s.fleet.lock().expect("fleet lock");
            assign(&runs, |r| fleet.live_in(r))
                .ok_or_else(|| ApiError::Conflict { code: "no_runs", message: "this manager has no runs: create one (POST /api/v1/runs)".into() })?
        }
    };
    let (worker_id, epsilon) = s.fleet.lock().expect("fleet lock").register(info, run.name(), &run.settings().workers, Instant::now());
    // On disk before the answer: a restart never hands this id out again.
    let state = s.clone();
    tokio::task::spawn_blocking(move || state.worker_ids.cover(worker_id)).await.map_err(anyhow::Error::from)??;
    tracing::info!(worker_id, %host, run = %run.name(), epsilon, "worker registered");
    let (g, w, d) = (&run.settings().game, &s.config.workers, &run.settings().dqn);
    Ok((
        StatusCode::CREATED,
        Json(Registration {
            worker_id,
            run: run.name().to_string(),
            epsilon,
            action_set: run.action_set().name().into(),
            task: run.task().name().into(),
            side: run.settings().side().name().into(),
            n_step: d.n_step,
            gamma: d.gamma,
            upload_every_transitions: w.upload_every_transitions,
            upload_every_secs: w.upload_every_secs,
            max_upload_bytes: s.config.server.max_upload_bytes as u64,
            ingest_queue_transitions: run.settings().trainer.queue_capacity(),
            model_poll_secs: w.model_poll_secs,
            heartbeat_secs: w.heartbeat_secs,
            eval_share: g.eval_share,
            cpu_level: g.cpu_level,
            cpu_level_top_share: g.cpu_level_top_share,
            selfplay: (!g.opponent_run.is_empty()).then(|| SelfPlay {
                opponent_run: g.opponent_run.clone(),
                cpu_share: g.opponent_cpu_share,
                latest_share: g.opponent_latest_share,
            }),
            // League matches are fights on the simulator (crate::league).
            league_share: if run.task() == shine_agent::Task::Fight { s.config.league.share } else { 0.0 },
        }),
    ))
}

/// `{id}` of `/workers/{id}/...` (by name: under `/runs/{run}` there are two parameters).
#[derive(Deserialize)]
pub struct WorkerPath {
    pub id: String,
}

async fn heartbeat(State(s): State<AppState>, Path(WorkerPath { id }): Path<WorkerPath>, ApiJson(hb): ApiJson<Heartbeat>) -> ApiResult<Json<HeartbeatReply>> {
    let unknown = || ApiError::NotFound(format!("unknown worker {id}: register again"));
    let wid: u32 = id.parse().map_err(|_| unknown())?;
    let epsilon = s.fleet.lock().expect("fleet lock").heartbeat(wid, hb, Instant::now()).ok_or_else(unknown)?;
    Ok(Json(HeartbeatReply { epsilon, watch: s.live.watchers(wid) > 0 }))
}

async fn list(State(s): State<AppState>, RunRef(run): RunRef) -> Json<WorkerList> {
    let workers = s.fleet.lock().expect("fleet lock").list(Instant::now(), Some(run.name()));
    Json(WorkerList { workers })
}

async fn episodes(State(s): State<AppState>, RunRef(run): RunRef, ApiJson(body): ApiJson<EpisodesRequest>) -> ApiResult<Json<EpisodesReply>> {
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
        s.history.record(Record::Episodes { run: run.name().to_string(), episodes: body.episodes.clone() });
        let mut log = run.episodes().lock().expect("episodes lock");
        for e in body.episodes {
            if e.eval {
                let t = evals.entry(e.model_version).or_default();
                t.0 += 1;
                t.1 += e.survived as u64;
            }
            log.add(e);
        }
    }
    s.metrics.episodes.with_label_values(&[run.name()]).inc_by(n as u64);
    s.fleet.lock().expect("fleet lock").touch(body.worker_id, Some(run.name()), 0, Instant::now());
    if !evals.is_empty() {
        for (&version, &(episodes, survived)) in &evals {
            s.history.record(Record::Eval { run: run.name().to_string(), version, episodes, survived });
        }
        let registry = run.registry().clone();
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
