//! `POST /experience`: one batch of transitions in the wire format (docs/upload-format.md).
//!
//! HTTP only: the token (401, checked by the router before the run is looked up, and
//! counted here: [`refused`]), `Content-Type` (415), the run taking uploads (503
//! `run_paused`, before the body is read), the size (413, from `Content-Length` before
//! reading anything, and again while reading), then [`crate::run::Run::accept`] does the
//! rest and says what to answer: 200 for a repeat of an accepted upload id, 202 once the
//! batch is durable and queued (a 202 means kept), or why not (400/422 for the content,
//! 503 `busy` or `storage_full`). Every refusal is counted in
//! `shine_uploads_rejected_total{reason}` and changes nothing else.

use super::{Access, Route, RunRef};
use crate::config::DEFAULT_RUN;
use crate::error::{ApiError, ApiResult};
use crate::run::Run;
use crate::app_state::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use shine_agent::protocol::UploadReply;
use std::time::Instant;

pub fn routes(max_upload_bytes: usize) -> Vec<Route> {
    vec![Route::post("/experience", Access::Token, upload).body_limit(max_upload_bytes).refused_with(refused)]
}

async fn upload(State(s): State<AppState>, RunRef(run): RunRef, req: Request) -> Response {
    match accept(&s, &run, req).await {
        Ok(r) => r,
        Err(e) => rejected(&s, &run, e),
    }
}

/// An upload without the token, refused by the router: counted for the run the path
/// names, as every refusal is, when that run exists (a stranger's upload to a run that
/// does not exist is counted nowhere).
fn refused(s: &AppState, run: Option<&str>) -> Response {
    match s.run(run.unwrap_or(DEFAULT_RUN)) {
        Ok(run) => rejected(s, &run, ApiError::Unauthorized),
        Err(_) => ApiError::Unauthorized.into_response(),
    }
}

/// A refused upload: counted in `shine_uploads_rejected_total{reason}`, logged, answered.
fn rejected(s: &AppState, run: &Run, e: ApiError) -> Response {
    if !matches!(e, ApiError::Internal(_)) {
        s.metrics.rejected.with_label_values(&[run.name(), e.reject_reason()]).inc();
        if matches!(e, ApiError::Busy | ApiError::RunPaused(_)) {
            // Flow control (the rate limiter or a burst), not a bad upload.
            tracing::debug!("upload held back: the trainer's queue is full");
        } else {
            tracing::info!(status = e.status().as_u16(), reason = e.reject_reason(), error = %e, "upload rejected");
        }
    }
    e.into_response()
}

fn is_octet_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/octet-stream"))
}

async fn accept(s: &AppState, run: &Run, req: Request) -> ApiResult<Response> {
    let limit = s.config.server.max_upload_bytes;
    if !is_octet_stream(req.headers()) {
        return Err(ApiError::UnsupportedMediaType("experience uploads are Content-Type: application/octet-stream".into()));
    }
    run.check_open()?;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    // DefaultBodyLimit (set on this route) also stops a body without Content-Length.
    let bytes = Bytes::from_request(req, s).await.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit },
        _ => ApiError::BadRequest { code: "bad_body", message: r.body_text() },
    })?;
    let a = run.accept(bytes).await?;
    s.fleet.lock().expect("fleet lock").touch(a.worker_id, Some(run.name()), a.count, Instant::now());
    if a.duplicate {
        s.metrics.duplicates.with_label_values(&[run.name()]).inc();
        tracing::debug!(worker_id = a.worker_id, "duplicate upload dropped");
        return Ok((StatusCode::OK, Json(UploadReply { accepted: 0, duplicate: true })).into_response());
    }
    s.metrics.accepted(run.name(), a.count);
    s.metrics.uploads.with_label_values(&[run.name()]).inc();
    Ok((StatusCode::ACCEPTED, Json(UploadReply { accepted: a.count, duplicate: false })).into_response())
}
