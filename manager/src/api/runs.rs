//! Runs: `GET /runs` (every run with its settings and progress), `POST /runs` (create
//! one: a `[[runs]]` entry as JSON), `GET /runs/{run}`, `POST /runs/{run}/pause` and
//! `/resume`, `DELETE /runs/{run}?confirm={run}`. Changing runs needs the token.

use super::{Access, ApiJson, Route, RunRef};
use crate::config::RunSpec;
use crate::error::{ApiError, ApiResult};
use crate::run::Run;
use crate::dashboard::views::{RunList, RunView};
use crate::app_state::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/runs", Access::Read, list),
        Route::post("/runs", Access::Token, create),
        Route::get("/runs/{run}", Access::Read, one),
        Route::delete("/runs/{run}", Access::Token, delete),
        Route::post("/runs/{run}/pause", Access::Token, pause),
        Route::post("/runs/{run}/resume", Access::Token, resume),
    ]
}

fn view(s: &AppState, run: &Run) -> RunView {
    let t = run.stats();
    let workers = s.fleet.lock().expect("fleet lock").live_in(run.name());
    RunView {
        name: run.name().to_string(),
        source: run.source(),
        paused: t.paused,
        running: t.running,
        settings: run.settings().clone(),
        prefix: super::run_prefix(run.name()),
        workers,
        train_steps: t.train_steps,
        train_steps_per_sec: t.train_steps_per_sec,
        transitions_inserted: t.transitions_inserted,
        samples_per_insert: t.samples_per_insert,
        replay_size: t.replay_len,
        model_version: t.model_version,
        eval_survival: run.episodes().lock().expect("episodes lock").eval_survival(),
        group: t.group,
    }
}

async fn list(State(s): State<AppState>) -> Json<RunList> {
    Json(RunList { runs: s.all_runs().iter().map(|r| view(&s, r)).collect() })
}

async fn one(State(s): State<AppState>, RunRef(run): RunRef) -> Json<RunView> {
    Json(view(&s, &run))
}

async fn create(State(s): State<AppState>, ApiJson(value): ApiJson<serde_json::Value>) -> ApiResult<(StatusCode, Json<RunView>)> {
    // Syntax and content type are the JSON's (400, 415); what the entry says is the
    // run's: an unknown key, a [server] section or a value of the wrong type is an
    // invalid run (422 invalid_run), as a value out of range is.
    let spec: RunSpec = serde_path_to_error::deserialize(value).map_err(|e| ApiError::Unprocessable { code: "invalid_run", message: e.to_string() })?;
    let state = s.clone();
    let run = tokio::task::spawn_blocking(move || state.runs.create(spec, &state.config, &state.device, &state.history)).await.map_err(anyhow::Error::from)??;
    Ok((StatusCode::CREATED, Json(view(&s, &run))))
}

async fn pause(State(s): State<AppState>, RunRef(run): RunRef) -> ApiResult<Json<RunView>> {
    set_paused(&s, &run, true).await
}

async fn resume(State(s): State<AppState>, RunRef(run): RunRef) -> ApiResult<Json<RunView>> {
    set_paused(&s, &run, false).await
}

async fn set_paused(s: &AppState, run: &Arc<Run>, paused: bool) -> ApiResult<Json<RunView>> {
    let (state, r) = (s.clone(), run.clone());
    // Writes state.toml and waits for a train step in flight: off the async runtime.
    tokio::task::spawn_blocking(move || r.set_paused(paused, &state.device)).await.map_err(anyhow::Error::from)??;
    Ok(Json(view(s, run)))
}

#[derive(Debug, Deserialize)]
struct Confirm {
    confirm: Option<String>,
}

#[derive(Debug, Serialize)]
struct DeletedView {
    deleted: String,
    /// Where its data was moved (nothing is erased).
    kept_at: String,
}

async fn delete(State(s): State<AppState>, RunRef(run): RunRef, q: Result<Query<Confirm>, QueryRejection>) -> ApiResult<Json<DeletedView>> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    let state = s.clone();
    let name = run.name().to_string();
    let deleted = tokio::task::spawn_blocking(move || state.runs.delete(&name, q.confirm.as_deref(), &state.config, &state.device))
        .await
        .map_err(anyhow::Error::from)??;
    // What the service keeps about the run goes with it; its history stays.
    let name = deleted.run.name();
    s.metrics.forget_run(name);
    s.history.record(crate::history::Record::Deleted { run: name.to_string() });
    s.fleet.lock().expect("fleet lock").remove_run(name);
    Ok(Json(DeletedView { deleted: name.to_string(), kept_at: deleted.kept_at.display().to_string() }))
}
