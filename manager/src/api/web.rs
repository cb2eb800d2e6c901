//! The dashboard: `web/` compiled into the binary (`include_str!`), so a manager needs
//! no files beside it and no internet: plain HTML, CSS and JavaScript that draw their
//! charts on `<canvas>` themselves (no libraries, no build step).
//!
//! `/` follows `public_reads` like every read (with `public_reads = false`, open it as
//! `/?token=TOKEN`; the page then sends the token with its own requests). The script
//! and stylesheet hold no data and are always served.

use super::Reader;
use crate::error::ApiError;
use crate::state::AppState;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("../../../web/index.html");
const APP_JS: &str = include_str!("../../../web/app.js");
const STYLE: &str = include_str!("../../../web/style.css");
const FAVICON: &str = include_str!("../../../web/favicon.svg");

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", FAVICON) }))
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
