//! The dashboard: `web/` compiled into the binary (`include_str!`), so a manager needs
//! no files beside it and no internet: plain HTML, CSS and JavaScript that draw their
//! charts on `<canvas>` themselves (no libraries, no build step: the script is ES
//! modules, `app.js` the page's entry, which imports the others by relative URL).
//!
//! `/` follows `public_reads` like every read (with `public_reads = false`, open it as
//! `/?token=TOKEN`; the page then sends the token with its own requests). The scripts
//! and stylesheet hold no data and are always served.

use super::Reader;
use crate::error::ApiError;
use crate::app_state::AppState;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("../../../web/index.html");
/// The dashboard's JavaScript modules, by file name: `app.js` (the entry) and what it imports.
const MODULES: [(&str, &str); 12] = [
    ("app.js", include_str!("../../../web/app.js")),
    ("api.js", include_str!("../../../web/api.js")),
    ("charts.js", include_str!("../../../web/charts.js")),
    ("dom.js", include_str!("../../../web/dom.js")),
    ("formats.js", include_str!("../../../web/formats.js")),
    ("league.js", include_str!("../../../web/league.js")),
    ("live.js", include_str!("../../../web/live.js")),
    ("play.js", include_str!("../../../web/play.js")),
    ("runs.js", include_str!("../../../web/runs.js")),
    ("stage.js", include_str!("../../../web/stage.js")),
    ("state.js", include_str!("../../../web/state.js")),
    ("tables.js", include_str!("../../../web/tables.js")),
];
const STYLE: &str = include_str!("../../../web/style.css");
const FAVICON: &str = include_str!("../../../web/favicon.svg");

pub fn router() -> Router<AppState> {
    let mut router = Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", FAVICON) }));
    for (name, body) in MODULES {
        // A module script must come with a JavaScript type, or the browser refuses it.
        router = router.route(&format!("/{name}"), get(move || async move { asset("text/javascript; charset=utf-8", body) }));
    }
    router
}

/// `no-cache`: a browser revalidates, so a new manager binary's page is used at once.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type)), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], body).into_response()
}

async fn index(reader: Result<Reader, ApiError>) -> Response {
    match reader {
        Ok(_) => asset("text/html; charset=utf-8", INDEX),
        // A person reads this one, not a program: say what to do, in HTML.
        Err(_) => (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))],
            "<!doctype html><title>Shine: token needed</title><body style=\"font-family:sans-serif;padding:2em\">\
             <h1>Token needed</h1><p>This manager runs with <code>public_reads = false</code>. \
             Open the dashboard as <code>/?token=YOUR_TOKEN</code> (the manager's <code>--token</code>).</p></body>",
        )
            .into_response(),
    }
}
