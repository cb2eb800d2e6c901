//! Models: `GET /models` (the list), `GET /models/latest` and `GET /models/{version}`
//! (the safetensors file, with an `ETag` derived from its bytes; `If-None-Match` with
//! that tag is answered `304` without a body, so workers polling for a new model cost
//! nothing).

use super::{run_prefix, Access, Route, RunRef};
use crate::config::DEFAULT_RUN;
use crate::error::{ApiError, ApiResult};
use crate::league::Player;
use crate::storage::registry::ModelEntry;
use crate::app_state::AppState;
use axum::extract::State;
use crate::run::Run;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/models", Access::Read, list),
        Route::get("/models/latest", Access::Read, latest),
        Route::get("/models/{version}", Access::Read, by_version),
    ]
}

#[derive(Debug, Serialize)]
struct ModelView {
    version: u64,
    train_step: u64,
    created_unix: u64,
    eval_survival: Option<f64>,
    eval_episodes: u64,
    bytes: u64,
    url: String,
    /// Its league rating and deviation (`null` until it played a league match).
    league_rating: Option<f64>,
    league_deviation: Option<f64>,
    league_matches: u64,
}

#[derive(Debug, Serialize)]
struct ModelList {
    latest: Option<u64>,
    models: Vec<ModelView>,
}

async fn list(State(m): State<AppState>, RunRef(s): RunRef) -> Json<ModelList> {
    let prefix = run_prefix(s.name());
    let league = m.league.lock().expect("league lock");
    let models: Vec<ModelView> = s
        .registry()
        .list()
        .into_iter()
        .map(|e| {
            let player = Player::Model { run: s.name().to_string(), version: e.version };
            let (rating, deviation, matches) = league.record(&player);
            (e, rating, deviation, matches)
        })
        .map(|(e, rating, deviation, matches)| ModelView {
            version: e.version,
            train_step: e.train_step,
            created_unix: e.created_unix,
            eval_survival: e.eval_survival(),
            eval_episodes: e.eval_episodes,
            bytes: e.bytes,
            url: format!("{prefix}/models/{}", e.version),
            league_rating: (matches > 0).then_some(rating),
            league_deviation: (matches > 0).then_some(deviation),
            league_matches: matches,
        })
        .collect();
    Json(ModelList { latest: models.first().map(|m| m.version), models })
}

async fn latest(RunRef(s): RunRef, headers: HeaderMap) -> ApiResult<Response> {
    let (entry, file) = s.registry().latest().ok_or_else(|| ApiError::NotFound("no model has been published yet".into()))?;
    Ok(model_response(&s, &headers, entry, file))
}

/// `{version}` of `/models/{version}`.
#[derive(Deserialize)]
struct VersionPath {
    version: String,
}

async fn by_version(RunRef(s): RunRef, Path(VersionPath { version }): Path<VersionPath>, headers: HeaderMap) -> ApiResult<Response> {
    let not_found = || ApiError::NotFound(format!("no model {version:?} (GET {}/models lists the kept versions)", run_prefix(s.name())));
    let v: u64 = version.parse().map_err(|_| not_found())?;
    let (entry, file) = s.registry().get(v).ok_or_else(not_found)?;
    Ok(model_response(&s, &headers, entry, file))
}

/// Whether `If-None-Match` names `etag` (or is `*`); weak tags compare equal too.
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers.get_all(header::IF_NONE_MATCH).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|t| {
        let t = t.trim();
        t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag
    })
}

fn model_response(s: &Run, headers: &HeaderMap, entry: ModelEntry, file: Bytes) -> Response {
    // Derived from the bytes: a cached copy can never be taken for other weights.
    let etag = entry.etag.clone();
    let mut h = HeaderMap::new();
    let val = |s: String| HeaderValue::from_str(&s).expect("ASCII header value");
    h.insert(header::ETAG, val(etag.clone()));
    h.insert("x-shine-model-version", val(entry.version.to_string()));
    h.insert("x-shine-train-step", val(entry.train_step.to_string()));
    // Clients may cache but must revalidate (cheap: a 304).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if matches(headers, &etag) {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    // The run's name in the file name, except default's (as before runs).
    let run = if s.name() == DEFAULT_RUN { String::new() } else { format!("{}-", s.name()) };
    h.insert(header::CONTENT_DISPOSITION, val(format!("attachment; filename=\"shine-{run}{}-v{}.safetensors\"", s.action_set().name(), entry.version)));
    (StatusCode::OK, h, Body::from(file)).into_response()
}
