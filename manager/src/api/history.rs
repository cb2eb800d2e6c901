//! History: `GET /history` (every run the history database knows, deleted ones too)
//! and `GET /history/{run}?since=T&max_points=N` (its stats series, thinned to at most
//! N points, and its models' evaluation record): for comparing runs, finished or not.

use super::{Access, Route};
use crate::error::{ApiError, ApiResult};
use crate::history::{EvalRecord, RunRecord};
use crate::app_state::AppState;
use crate::dashboard::series::Sample;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};

pub fn routes() -> Vec<Route> {
    vec![Route::get("/history", Access::Read, list), Route::get("/history/{run}", Access::Read, one)]
}

/// Points served when `max_points` is not given.
const DEFAULT_POINTS: usize = 2000;
/// The most points one request may ask for.
const MAX_POINTS: usize = 100_000;

#[derive(Debug, Serialize)]
struct HistoryList {
    runs: Vec<RunRecord>,
}

async fn list(State(s): State<AppState>) -> ApiResult<Json<HistoryList>> {
    let state = s.clone();
    let runs = tokio::task::spawn_blocking(move || state.history.runs()).await.map_err(anyhow::Error::from)??;
    Ok(Json(HistoryList { runs }))
}

#[derive(Debug, Deserialize)]
struct SeriesQuery {
    since: Option<f64>,
    max_points: Option<usize>,
}

#[derive(Debug, Serialize)]
struct RunHistory {
    run: String,
    series: Vec<Sample>,
    evals: Vec<EvalRecord>,
}

#[derive(Deserialize)]
struct RunPath {
    run: String,
}

async fn one(State(s): State<AppState>, Path(RunPath { run }): Path<RunPath>, q: Result<Query<SeriesQuery>, QueryRejection>) -> ApiResult<Json<RunHistory>> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    let points = q.max_points.unwrap_or(DEFAULT_POINTS);
    if !(1..=MAX_POINTS).contains(&points) {
        return Err(ApiError::BadRequest { code: "bad_query", message: format!("max_points = {points}: ask for 1 to {MAX_POINTS}") });
    }
    let since = q.since.unwrap_or(f64::NEG_INFINITY);
    let state = s.clone();
    let name = run.clone();
    let found = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<(Vec<Sample>, Vec<EvalRecord>)>> {
        // A run of this manager is known even before the history's writer (about once
        // a second) has stored it: a run created a moment ago has a history, if empty.
        if state.run(&name).is_err() && !state.history.knows(&name)? {
            return Ok(None);
        }
        Ok(Some((state.history.series(&name, since, points)?, state.history.evals(&name)?)))
    })
    .await
    .map_err(anyhow::Error::from)??;
    let (series, evals) = found.ok_or_else(|| ApiError::NotFound(format!("the history knows no run {run:?} (GET /api/v1/history lists those it does)")))?;
    Ok(Json(RunHistory { run, series, evals }))
}
