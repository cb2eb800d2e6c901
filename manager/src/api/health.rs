//! `GET /healthz` (liveness: `200 ok`) and `GET /metrics` (Prometheus text).

use super::{Access, Route};
use crate::app_state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

pub fn routes() -> Vec<Route> {
    vec![Route::get("/healthz", Access::Open, healthz), Route::get("/metrics", Access::Read, metrics)]
}

async fn healthz() -> &'static str {
    "ok"
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    // Trainer-owned values are read at scrape time, not only at the last sample.
    let runs = s.all_runs();
    for run in &runs {
        s.metrics.observe_trainer(run.name(), &run.stats());
        s.metrics.observe_wal(run.name(), run.wal_stats());
    }
    let workers = s.fleet.lock().expect("fleet lock").list(std::time::Instant::now(), None);
    let names: Vec<String> = runs.iter().map(|r| r.name().to_string()).collect();
    s.metrics.observe_fleet(&workers, &names);
    s.metrics.observe_device(s.device.training_device());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render())
}
