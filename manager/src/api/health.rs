//! `GET /healthz` (liveness: `200 ok`) and `GET /metrics` (Prometheus text).

use super::Reader;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/metrics", get(metrics))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn metrics(State(s): State<AppState>, _: Reader) -> impl IntoResponse {
    // Trainer-owned values are read at scrape time, not only at the last sample.
    s.metrics.observe_trainer(&s.trainer.stats());
    s.metrics.observe_wal(&s.wal.stats);
    let workers = {
        let fleet = s.fleet.lock().expect("fleet lock");
        s.metrics.workers.set(fleet.live() as i64);
        fleet.list(std::time::Instant::now())
    };
    s.metrics.observe_fleet(&workers);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render())
}
