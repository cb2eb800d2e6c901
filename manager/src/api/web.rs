//! The dashboard: `web/` compiled into the binary (`include_str!`), so a manager needs
//! no files beside it and no internet: plain HTML, CSS and JavaScript that draw their
//! charts on `<canvas>` themselves (no libraries, no build step: the script is ES
//! modules, `app.js` the page's entry, which imports the others by relative URL).
//!
//! `/` follows `public_reads` like every read (with `public_reads = false`, open it as
//! `/?token=TOKEN`; the page then sends the token with its own requests). The scripts
//! and stylesheet hold no data and are always served.

use super::{Access, Route};
use crate::app_state::AppState;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

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

pub fn routes() -> Vec<Route> {
    let mut routes = vec![
        Route::get("/", Access::Read, index).refused_with(token_needed),
        Route::get("/index.html", Access::Read, index).refused_with(token_needed),
        Route::get("/style.css", Access::Open, || async { asset("text/css; charset=utf-8", STYLE) }),
        Route::get("/favicon.svg", Access::Open, || async { asset("image/svg+xml", FAVICON) }),
    ];
    for (name, body) in MODULES {
        // A module script must come with a JavaScript type, or the browser refuses it.
        routes.push(Route::get(&format!("/{name}"), Access::Open, move || async move { asset("text/javascript; charset=utf-8", body) }));
    }
    routes
}

/// `no-cache`: a browser revalidates, so a new manager binary's page is used at once.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type)), (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"))], body).into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// The page's refusal without the right to read: a person reads this one, not a
/// program, so it says what to do, in HTML.
fn token_needed(_: &AppState, _: Option<&str>) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))],
        "<!doctype html><title>Shine: token needed</title><body style=\"font-family:sans-serif;padding:2em\">\
         <h1>Token needed</h1><p>This manager runs with <code>public_reads = false</code>. \
         Open the dashboard as <code>/?token=YOUR_TOKEN</code> (the manager's <code>--token</code>).</p></body>",
    )
        .into_response()
}
