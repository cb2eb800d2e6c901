//! `GET /stats`: the dashboard's time series (`?since=T`: only samples after unix
//! time T, for incremental polling), the current values, and the workers.

use super::{Access, Route, RunRef};
use crate::error::{ApiError, ApiResult};
use crate::dashboard::views::StatsReply;
use crate::dashboard::sampler;
use crate::app_state::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use std::time::Instant;

pub fn routes() -> Vec<Route> {
    vec![Route::get("/stats", Access::Read, get_stats)]
}

#[derive(Debug, Deserialize)]
struct Since {
    since: Option<f64>,
}

async fn get_stats(State(s): State<AppState>, RunRef(run): RunRef, q: Result<Query<Since>, QueryRejection>) -> ApiResult<Json<StatsReply>> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    let (series, last) = {
        let series = run.series().lock().expect("series lock");
        (series.since(q.since), series.last().cloned())
    };
    let current = {
        let mut fleet = s.fleet.lock().expect("fleet lock");
        fleet.sweep(Instant::now());
        sampler::sample(&run, &s.metrics, &fleet, last.as_ref())
    };
    let (episodes_total, eval_episodes_total) = {
        let e = run.episodes().lock().expect("episodes lock");
        (e.total, e.eval_total)
    };
    let workers = s.fleet.lock().expect("fleet lock").list(Instant::now(), Some(run.name()));
    Ok(Json(StatsReply {
        run: run.name().to_string(),
        paused: run.is_paused(),
        interval_secs: s.config.stats.interval_secs,
        current,
        series,
        replay_capacity: run.settings().replay.capacity,
        action_set: run.action_set().name(),
        episodes_total,
        eval_episodes_total,
        workers,
    }))
}
