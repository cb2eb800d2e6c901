//! The HTTP API (docs/api.md is the contract): [`app`] builds the router from one
//! module per route group, each listing its own routes (`routes()`), so tests can serve
//! it on any listener.
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
//! Access: each module lists its routes ([`Route`]: a method, a path, its [`Access`]),
//! and the router is built from that list alone ([`served`]), so no route is served
//! without its access. The router checks it before anything else, the run named in the
//! path included: a write, and a worker's live long poll, need the bearer token
//! ([`Access::Token`]); reads need it only with `public_reads = false`
//! ([`Access::Read`]), and then also take it as `?token=`, since a browser can put no
//! header on a page load, a download link or a WebSocket. So a caller without access
//! gets 401 whether or not the run exists, and a 404 naming the runs there are goes only
//! to a caller the route serves: a stranger learns no run's name.
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
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::handler::Handler;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::http::{header, HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Router;
use std::sync::Arc;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tracing::Level;

/// Body limit of the JSON routes (axum's default; episodes batches are far smaller).
pub const JSON_LIMIT: usize = 2 << 20;

/// The whole application, ready to serve: every route of [`served`], each behind its
/// access check.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new();
    for route in served(state.config.server.max_upload_bytes) {
        let path = route.path.clone();
        router = router.route(&path, route.service(&state));
    }
    router
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

/// Every route the router serves ([`app`] is built from these and nothing else), with
/// the path it is served at: a run's routes under `/api/v1` (the run `default`) and
/// under `/api/v1/runs/{run}` (after the run's lookup: 404 when there is none), the
/// routes that name runs themselves once under `/api/v1`, health and the dashboard at
/// the root. `max_upload_bytes` is the upload route's body limit.
pub fn served(max_upload_bytes: usize) -> Vec<Route> {
    let per_run = || [workers::routes(), experience::routes(max_upload_bytes), models::routes(), stats::routes(), live::routes(), play::routes()];
    let placed =
        |prefix: &'static str, in_run: bool, routes: Vec<Route>| routes.into_iter().map(move |r| Route { path: format!("{prefix}{}", r.path), in_run, ..r });
    let once = [runs::routes(), history::routes(), league::routes()];
    (per_run().into_iter().flat_map(|r| placed("/api/v1", false, r)))
        .chain(per_run().into_iter().flat_map(|r| placed("/api/v1/runs/{run}", true, r)))
        .chain(once.into_iter().flat_map(|r| placed("/api/v1", false, r)))
        .chain([health::routes(), web::routes()].into_iter().flatten())
        .collect()
}

/// Who may make a request of a route. The router checks it first, before the run
/// named in the path is looked up and before the handler reads anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone: `/healthz` (for probes), the dashboard's scripts and stylesheet.
    Open,
    /// A read: anyone unless `public_reads = false`; then the token, as the bearer
    /// header or as `?token=`.
    Read,
    /// The bearer token, as the header only (a URL ends up in browser history and
    /// proxy logs): every write, whatever its method, and a worker's live long poll.
    Token,
}

impl Access {
    fn allows(self, state: &AppState, parts: &Parts) -> bool {
        match self {
            Access::Open => true,
            Access::Read => may_read(state, parts),
            Access::Token => authorized(state, &parts.headers),
        }
    }
}

/// What a caller refused by a route's [`Access`] gets, given the run the path names
/// (if it names one).
pub type Refused = fn(&AppState, Option<&str>) -> Response;

/// One method of one path, who may call it, and its handler: what a route module lists
/// (`routes()`) and [`served`] collects.
pub struct Route {
    pub method: Method,
    /// As served (in a module's own list: relative to where the module is served),
    /// with axum's `{name}` for a path parameter.
    pub path: String,
    pub access: Access,
    /// The run named in the path is looked up first (a run's routes under `/runs/{run}`).
    pub in_run: bool,
    handler: MethodRouter<AppState>,
    refused: Refused,
}

impl Route {
    fn on(method: Method, path: &str, access: Access, handler: MethodRouter<AppState>) -> Route {
        Route { method, path: path.into(), access, in_run: false, handler, refused: unauthorized }
    }

    pub fn get<H: Handler<T, AppState>, T: 'static>(path: &str, access: Access, handler: H) -> Route {
        Route::on(Method::GET, path, access, axum::routing::get(handler))
    }

    pub fn post<H: Handler<T, AppState>, T: 'static>(path: &str, access: Access, handler: H) -> Route {
        Route::on(Method::POST, path, access, axum::routing::post(handler))
    }

    pub fn delete<H: Handler<T, AppState>, T: 'static>(path: &str, access: Access, handler: H) -> Route {
        Route::on(Method::DELETE, path, access, axum::routing::delete(handler))
    }

    /// A body limit other than [`JSON_LIMIT`] (axum's default).
    pub fn body_limit(self, bytes: usize) -> Route {
        Route { handler: self.handler.layer(DefaultBodyLimit::max(bytes)), ..self }
    }

    /// A refusal other than the JSON 401 `unauthorized`.
    pub fn refused_with(self, refused: Refused) -> Route {
        Route { refused, ..self }
    }

    /// The handler behind the run's lookup (if it has one) behind the access check:
    /// layers run last-added first.
    fn service(self, state: &AppState) -> MethodRouter<AppState> {
        let mut handler = self.handler;
        if self.in_run {
            handler = handler.route_layer(axum::middleware::from_fn_with_state(state.clone(), run_exists));
        }
        let guard = Guard { state: state.clone(), access: self.access, refused: self.refused };
        // route_layer: a method the path does not take is still 405, whoever asks.
        handler.route_layer(axum::middleware::from_fn_with_state(guard, check_access))
    }
}

/// The JSON 401: what a refused caller gets.
fn unauthorized(_: &AppState, _: Option<&str>) -> Response {
    ApiError::Unauthorized.into_response()
}

/// A route's access check and refusal, as its middleware's state.
#[derive(Clone)]
struct Guard {
    state: AppState,
    access: Access,
    refused: Refused,
}

/// Middleware: the caller's access to the route, before anything else.
async fn check_access(State(g): State<Guard>, req: Request, next: axum::middleware::Next) -> Response {
    let (mut parts, body) = req.into_parts();
    if g.access.allows(&g.state, &parts) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let run = RunName::from_request_parts(&mut parts, &g.state).await.ok().and_then(|RunName(name)| name);
    (g.refused)(&g.state, run.as_deref())
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
/// the runs' names (the router has checked the caller's access before: [`Access`]).
pub struct RunRef(pub Arc<Run>);

impl FromRequestParts<AppState> for RunRef {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let RunName(name) = RunName::from_request_parts(parts, state).await?;
        state.run(name.as_deref().unwrap_or(DEFAULT_RUN)).map(RunRef)
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
fn authorized(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(token) = state.config.token() else { return true };
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer).is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes()))
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

/// Whether the caller may read: reads are public, or it carries the token (as the
/// header or, for what a browser requests without headers, as `?token=`).
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
