//! The HTTP API (docs/api.md is the contract): [`app`] builds the router from one
//! module per route group, each exporting its own `router()`, so tests can serve it on
//! any listener.
//!
//! - [`runs`]: list, create, pause, resume and delete runs.
//! - [`history`]: every run's stats series and evaluations from the history database.
//! - [`league`]: the league's table, its matches for the workers, their results.
//! - [`workers`]: register, heartbeat, list; finished episodes.
//! - [`experience`]: the binary upload.
//! - [`models`]: list and download (ETag).
//! - [`stats`]: the dashboard's time series.
//! - [`health`]: `/healthz`, `/metrics`.
//! - [`live`]: live matches (the browsers' WebSocket, the workers' frames).
//! - [`play`]: a person against a model in the browser (a WebSocket).
//! - [`web`]: the dashboard's static files (`web/`, compiled in).
//!
//! Runs: a run's routes ([`workers`], [`experience`], [`models`], [`stats`], [`live`],
//! [`play`]) are served twice, under `/api/v1/runs/{run}/...` for the run named in the
//! path ([`RunRef`]) and under `/api/v1/...` for the run `default` (the routes from
//! before runs); `POST /api/v1/workers` is the exception: without a run in the path the
//! manager assigns one. [`runs`], [`history`] and [`league`] are served once, under
//! `/api/v1` (they name runs themselves); [`health`] and [`web`] at the root.
//!
//! Access: writes need the bearer token ([`Writer`]); reads need it only with
//! `public_reads = false` ([`Reader`]), and then also take it as `?token=`, since a
//! browser can put no header on a page load, a download link or a WebSocket. A run that
//! does not exist is a 404 naming the runs there are only for a caller allowed to make
//! that request of a run that exists (for a write, any method but GET and HEAD: the
//! token; for a read: the right to read); anyone else gets the 401 they would get for a
//! run that exists ([`RunRef`]), so a stranger learns no run's name, and the token is
//! checked first on every write, as documented.
//!
//! This layer is HTTP only: it extracts, calls the run layer ([`crate::run`](mod@crate::run)) and maps
//! its errors ([`crate::error`]); blocking calls go through `spawn_blocking`.

pub mod experience;
pub mod health;
pub mod history;
pub mod league;
pub mod live;
pub mod models;
pub mod play;
pub mod runs;
pub mod stats;
pub mod web;
pub mod workers;

use crate::config::DEFAULT_RUN;
use crate::error::ApiError;
use crate::run::Run;
use crate::app_state::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::RawPathParams;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::http::{header, HeaderMap};
use axum::Router;
use std::sync::Arc;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tracing::Level;

/// Body limit of the JSON routes (axum's default; episodes batches are far smaller).
pub const JSON_LIMIT: usize = 2 << 20;

/// The whole application, ready to serve.
pub fn app(state: AppState) -> Router {
    let per_run = || {
        Router::new()
            .merge(workers::router())
            .merge(experience::router(state.config.server.max_upload_bytes))
            .merge(models::router())
            .merge(stats::router())
            .merge(live::router())
            .merge(play::router())
    };
    // Under /runs/{run}, every route first checks that the run exists (after the
    // caller's right to know it: RunRef).
    let in_run = per_run().route_layer(axum::middleware::from_fn_with_state(state.clone(), run_exists));
    let api = per_run().merge(runs::router()).merge(history::router()).merge(league::router()).nest("/runs/{run}", in_run);
    Router::new()
        .nest("/api/v1", api)
        .merge(health::router())
        .merge(web::router())
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        // axum answers a wrong method with an empty 405: give it the documented body.
        .layer(axum::middleware::map_response(method_not_allowed_body))
        // A 5xx is logged once where it happens (an internal error's cause in
        // `ApiError::into_response`); a 503 is routine flow control. The trace layer's
        // own failure line would only repeat them at ERROR: keep it for debugging.
        .layer(
            TraceLayer::new_for_http()
                // The span names the request without a `?token=`: never in a log line.
                .make_span_with(|req: &axum::http::Request<axum::body::Body>| {
                    tracing::debug_span!("request", method = %req.method(), uri = %redacted(req.uri()), version = ?req.version())
                })
                .on_failure(DefaultOnFailure::new().level(Level::DEBUG)),
        )
        .with_state(state)
}

/// Where a run's routes live: `/api/v1` for `default` (the routes from before runs),
/// `/api/v1/runs/{run}` for the others.
pub fn run_prefix(run: &str) -> String {
    if run == DEFAULT_RUN {
        "/api/v1".into()
    } else {
        format!("/api/v1/runs/{run}")
    }
}

/// The run named by the request's path (`/runs/{run}/...`), if it names one.
pub struct RunName(pub Option<String>);

impl FromRequestParts<AppState> for RunName {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let params = RawPathParams::from_request_parts(parts, state).await.ok();
        Ok(RunName(params.and_then(|p| p.iter().find(|(k, _)| *k == "run").map(|(_, v)| v.to_string()))))
    }
}

/// The run a request is for: the one in its path, or `default`. None there: 404 with
/// the runs' names for a caller its handler would serve (a write with the token, a
/// read allowed to read), else 401, as for a run that exists: its handler would refuse
/// the caller too, and for a write the token comes first whether or not the run exists.
pub struct RunRef(pub Arc<Run>);

impl FromRequestParts<AppState> for RunRef {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let RunName(name) = RunName::from_request_parts(parts, state).await?;
        match state.run(name.as_deref().unwrap_or(DEFAULT_RUN)) {
            Ok(run) => Ok(RunRef(run)),
            Err(_) if !may_ask(state, parts) => Err(ApiError::Unauthorized),
            Err(e) => Err(e),
        }
    }
}

/// Whether a request is one its route would answer for this caller as far as access
/// goes: a write (any method but GET and HEAD) needs the token, a read the right to read.
fn may_ask(state: &AppState, parts: &Parts) -> bool {
    if parts.method == axum::http::Method::GET || parts.method == axum::http::Method::HEAD {
        may_read(state, parts)
    } else {
        authorized(state, &parts.headers)
    }
}

/// Middleware: a request under `/runs/{run}` for a run that does not exist is 404.
async fn run_exists(RunRef(_): RunRef, req: Request, next: axum::middleware::Next) -> axum::response::Response {
    next.run(req).await
}

/// `uri` as it may be logged: the value of any `token` query parameter replaced.
pub fn redacted(uri: &axum::http::Uri) -> String {
    match uri.query() {
        None => uri.path().to_string(),
        Some(q) => {
            let q: Vec<String> = q
                .split('&')
                .map(|kv| if kv.split('=').next().is_some_and(|k| k.eq_ignore_ascii_case("token")) { "token=REDACTED".to_string() } else { kv.to_string() })
                .collect();
            format!("{}?{}", uri.path(), q.join("&"))
        }
    }
}

/// A bare 405 from the router gets [`ApiError::MethodNotAllowed`]'s body; its headers
/// (`Allow`) are kept.
async fn method_not_allowed_body(resp: axum::response::Response) -> axum::response::Response {
    if resp.status() != StatusCode::METHOD_NOT_ALLOWED {
        return resp;
    }
    let (parts, _) = resp.into_parts();
    let (json_parts, body) = axum::response::IntoResponse::into_response(ApiError::MethodNotAllowed).into_parts();
    let mut out = axum::response::Response::from_parts(parts, body);
    out.headers_mut().extend(json_parts.headers);
    out
}

/// Comparison whose time does not depend on where the inputs differ (`subtle`), so the
/// token cannot be guessed byte by byte from response times.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

/// The credentials of an `Authorization: Bearer ...` header; the scheme name is
/// case-insensitive (RFC 7235).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// Whether the request carries the manager's token (always true without one).
pub fn authorized(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(token) = state.config.token() else { return true };
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer).is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
}

/// Extractor for routes that change something: the bearer token is required.
pub struct Writer;

impl FromRequestParts<AppState> for Writer {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if authorized(state, &parts.headers) {
            Ok(Writer)
        } else {
            Err(ApiError::Unauthorized)
        }
    }
}

/// The `token` query parameter, for what browsers request without headers.
#[derive(serde::Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

fn query_token_ok(state: &AppState, parts: &Parts) -> bool {
    let Some(token) = state.config.token() else { return true };
    axum::extract::Query::<TokenQuery>::try_from_uri(&parts.uri)
        .ok()
        .and_then(|q| q.0.token)
        .is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
}

/// Extractor for reads: public unless `public_reads = false`; then the token as a
/// bearer header or as `?token=` (only reads take it there: a URL ends up in browser
/// history and proxy logs, so writes insist on the header).
pub struct Reader;

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if may_read(state, parts) {
            Ok(Reader)
        } else {
            Err(ApiError::Unauthorized)
        }
    }
}

/// Whether the caller may read: reads are public, or it carries the token.
fn may_read(state: &AppState, parts: &Parts) -> bool {
    state.config.server.public_reads || authorized(state, &parts.headers) || query_token_ok(state, parts)
}

/// Bad JSON as the API's errors: syntax 400, a missing or mistyped field 422.
impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let message = r.body_text();
        match r.status() {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType(message),
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit: JSON_LIMIT },
            StatusCode::UNPROCESSABLE_ENTITY => ApiError::Unprocessable { code: "invalid_json", message },
            _ => ApiError::BadRequest { code: "bad_json", message },
        }
    }
}

/// `Json` whose rejections are [`ApiError`]s, so bad JSON gets the JSON error body.
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    axum::Json<T>: FromRequest<S, Rejection = axum::extract::rejection::JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(v) = axum::Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(v))
    }
}
