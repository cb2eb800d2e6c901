//! Runs: `GET /runs` (every run with its settings and progress), `POST /runs` (create
//! one: a `[[runs]]` entry as JSON), `GET /runs/{run}`, `POST /runs/{run}/pause` and
//! `/resume`, `DELETE /runs/{run}?confirm={run}`. Changing runs needs the token.

use super::{ApiJson, Reader, RunRef, Writer};
use crate::config::{RunSettings, RunSpec};
use crate::error::{ApiError, ApiResult};
use crate::run::{self, Run, Source};
use crate::state::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(list).post(create))
        .route("/runs/{run}", get(one).delete(delete))
        .route("/runs/{run}/pause", post(pause))
        .route("/runs/{run}/resume", post(resume))
}

/// A run as `GET /runs` shows it.
#[derive(Debug, Serialize)]
pub struct RunView {
    name: String,
    source: Source,
    paused: bool,
    /// False once its trainer has stopped (see the manager's log).
    running: bool,
    /// Its settings: the manager's sections with the run's changes applied.
    settings: RunSettings,
    /// Where its routes are (`/api/v1` for `default`).
    prefix: String,
    workers: usize,
    train_steps: u64,
    train_steps_per_sec: f64,
    transitions_inserted: u64,
    samples_per_insert: f64,
    replay_size: usize,
    model_version: u64,
    /// Full-minute survival of its recent evaluation episodes (null: none yet).
    eval_survival: Option<f64>,
}

fn view(s: &AppState, run: &Run) -> RunView {
    let t = run.trainer.stats();
    let workers = s.fleet.lock().expect("fleet lock").live_in(&run.name);
    RunView {
        name: run.name.clone(),
        source: run.source,
        paused: t.paused,
        running: t.running,
        settings: run.settings.clone(),
        prefix: super::run_prefix(&run.name),
        workers,
        train_steps: t.train_steps,
        train_steps_per_sec: t.train_steps_per_sec,
        transitions_inserted: t.transitions_inserted,
        samples_per_insert: t.samples_per_insert,
        replay_size: t.replay_len,
        model_version: t.model_version,
        eval_survival: run.episodes.lock().expect("episodes lock").eval_survival(),
    }
}

#[derive(Debug, Serialize)]
struct RunList {
    runs: Vec<RunView>,
}

async fn list(State(s): State<AppState>, _: Reader) -> Json<RunList> {
    Json(RunList { runs: s.all_runs().iter().map(|r| view(&s, r)).collect() })
}

async fn one(State(s): State<AppState>, _: Reader, RunRef(run): RunRef) -> Json<RunView> {
    Json(view(&s, &run))
}

async fn create(State(s): State<AppState>, _: Writer, ApiJson(spec): ApiJson<RunSpec>) -> ApiResult<(StatusCode, Json<RunView>)> {
    // Checked before anything is written: a bad entry changes nothing.
    spec.resolve(&s.config).map_err(|e| ApiError::Unprocessable { code: "invalid_run", message: format!("{e:#}") })?;
    let _changing = s.run_changes.lock().await;
    if s.runs.read().expect("runs lock").contains_key(&spec.name) {
        return Err(ApiError::Conflict { code: "run_exists", message: format!("a run named {:?} exists already", spec.name) });
    }
    let state = s.clone();
    let opened =
        tokio::task::spawn_blocking(move || Run::open(spec, Source::Api, &state.config, &state.device, &state.history)).await.map_err(anyhow::Error::from)?;
    // What fails here is the data under the run's directory (a checkpoint of another
    // action set, say): the request's to fix, not the manager's.
    let run = Arc::new(opened.map_err(|e| ApiError::Unprocessable { code: "invalid_run", message: format!("{e:#}") })?);
    s.runs.write().expect("runs lock").insert(run.name.clone(), run.clone());
    tracing::info!(run = %run.name, "run created");
    Ok((StatusCode::CREATED, Json(view(&s, &run))))
}

async fn pause(State(s): State<AppState>, _: Writer, RunRef(run): RunRef) -> ApiResult<Json<RunView>> {
    set_paused(&s, &run, true).await
}

async fn resume(State(s): State<AppState>, _: Writer, RunRef(run): RunRef) -> ApiResult<Json<RunView>> {
    set_paused(&s, &run, false).await
}

async fn set_paused(s: &AppState, run: &Arc<Run>, paused: bool) -> ApiResult<Json<RunView>> {
    let (state, r) = (s.clone(), run.clone());
    // Writes state.toml and waits for a train step in flight: off the async runtime.
    // Once answered, a paused run takes no further step.
    tokio::task::spawn_blocking(move || {
        r.set_paused(paused)?;
        state.device.barrier()
    })
    .await
    .map_err(anyhow::Error::from)??;
    Ok(Json(view(s, run)))
}

#[derive(Debug, Deserialize)]
struct Confirm {
    confirm: Option<String>,
}

#[derive(Debug, Serialize)]
struct Deleted {
    deleted: String,
    /// Where its data was moved (nothing is erased).
    kept_at: String,
}

async fn delete(State(s): State<AppState>, _: Writer, RunRef(run): RunRef, q: Result<Query<Confirm>, QueryRejection>) -> ApiResult<Json<Deleted>> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    if q.confirm.as_deref() != Some(run.name.as_str()) {
        return Err(ApiError::BadRequest {
            code: "confirm_required",
            message: format!("deleting a run stops its training for good: repeat its name, DELETE /api/v1/runs/{0}?confirm={0}", run.name),
        });
    }
    if run.source == Source::Config {
        return Err(ApiError::Conflict {
            code: "declared_in_config",
            message: format!(
                "run {:?} is declared in the config file: remove it there and restart (or pause it: POST /api/v1/runs/{}/pause)",
                run.name, run.name
            ),
        });
    }
    let _changing = s.run_changes.lock().await;
    // New requests for it are 404 from here; the device takes its queued uploads in,
    // writes its final checkpoint and lets it go.
    s.runs.write().expect("runs lock").remove(&run.name);
    let (state, r) = (s.clone(), run.clone());
    let kept_at = tokio::task::spawn_blocking(move || -> anyhow::Result<std::path::PathBuf> {
        state.device.remove_run(&r.trainer)?;
        let to = run::deleted_dir(&state.config.server.data_dir, &r.name);
        std::fs::create_dir_all(to.parent().expect("under deleted/"))?;
        std::fs::rename(&r.dir, &to)?;
        Ok(to)
    })
    .await
    .map_err(anyhow::Error::from)??;
    s.metrics.forget_run(&run.name);
    s.history.record(crate::history::Record::Deleted { run: run.name.clone() });
    s.fleet.lock().expect("fleet lock").remove_run(&run.name);
    tracing::info!(run = %run.name, kept_at = %kept_at.display(), "run deleted");
    Ok(Json(Deleted { deleted: run.name.clone(), kept_at: kept_at.display().to_string() }))
}
