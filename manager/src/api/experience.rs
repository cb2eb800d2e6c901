//! `POST /experience`: one batch of transitions in the wire format (docs/upload-format.md).
//!
//! Checks in order, cheapest first, each rejection counted in
//! `shine_uploads_rejected_total{reason}` and changing nothing else: token (401),
//! `Content-Type` (415), size (413, from `Content-Length` before reading anything, and
//! again while reading), the header (400), a repeat of an accepted upload id (200,
//! nothing added), room in the trainer's queue for the header's count (503 `busy`,
//! decided before any decompression), then the complete validation of
//! `experience::decode` (400 or 422), off the async runtime since it decompresses and
//! checks up to 5.7 M floats. Before the header is read: the run (from the path) must
//! not be paused (503 `run_paused`). A fully valid batch is appended to the write-ahead log
//! (503 `storage_full` when the disk is full) and only then queued and answered 202:
//! a 202 means kept.

use super::RunRef;
use crate::error::{ApiError, ApiResult};
use crate::run::Run;
use crate::state::AppState;
use crate::wal::WalError;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use shine_agent::experience;
use shine_agent::protocol::UploadReply;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

pub fn router(max_upload_bytes: usize) -> Router<AppState> {
    Router::new().route("/experience", post(upload).layer(DefaultBodyLimit::max(max_upload_bytes)))
}

async fn upload(State(s): State<AppState>, RunRef(run): RunRef, req: Request) -> Response {
    match accept(&s, &run, req).await {
        Ok(r) => r,
        Err(e) => {
            if !matches!(e, ApiError::Internal(_)) {
                s.metrics.rejected.with_label_values(&[&run.name, e.reject_reason()]).inc();
                if matches!(e, ApiError::Busy | ApiError::RunPaused(_)) {
                    // Flow control (the rate limiter or a burst), not a bad upload.
                    tracing::debug!("upload held back: the trainer's queue is full");
                } else {
                    tracing::info!(status = e.status().as_u16(), reason = e.reject_reason(), error = %e, "upload rejected");
                }
            }
            e.into_response()
        }
    }
}

/// The `200` for an upload id already accepted: nothing is added.
fn duplicate(s: &AppState, run: &Run, worker_id: u32) -> Response {
    s.fleet.lock().expect("fleet lock").touch(worker_id, Some(&run.name), 0, Instant::now());
    s.metrics.duplicates.with_label_values(&[&run.name]).inc();
    tracing::debug!(worker_id, "duplicate upload dropped");
    (StatusCode::OK, Json(UploadReply { accepted: 0, duplicate: true })).into_response()
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
    if !super::authorized(s, req.headers()) {
        return Err(ApiError::Unauthorized);
    }
    if run.is_paused() {
        return Err(ApiError::RunPaused(run.name.clone()));
    }
    if !is_octet_stream(req.headers()) {
        return Err(ApiError::UnsupportedMediaType("experience uploads are Content-Type: application/octet-stream".into()));
    }
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    // DefaultBodyLimit (set on this route) also stops a body without Content-Length.
    let bytes = Bytes::from_request(req, s).await.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit },
        _ => ApiError::BadRequest { code: "bad_body", message: r.body_text() },
    })?;
    // From the header alone, before any decompression: is there room? (A busy
    // manager must not spend its CPU on uploads it will refuse.)
    let header = experience::Header::parse(&bytes)?;
    let (count, worker_id, upload_id, played_by) = (header.count as u64, header.meta.worker_id, header.meta.upload_id, header.meta.model_version);
    if run.dedup.lock().expect("dedup lock").contains(&upload_id) {
        return Ok(duplicate(s, run, worker_id));
    }
    let room = run.trainer.reserve(count).map_err(|_| ApiError::Busy)?;
    let expect = run.expect;
    let body = bytes.clone();
    let batch = tokio::task::spawn_blocking(move || experience::decode(&body, expect)).await.map_err(anyhow::Error::from)??;
    // Durable before the answer (the log's group commit). A copy of this upload racing
    // us may also be logged: recovery takes an upload id once.
    run.wal.append(bytes, count).await.map_err(|e| match e {
        WalError::StorageFull(_) => ApiError::StorageFull(e.to_string()),
        WalError::Io(_) | WalError::Closed => ApiError::Internal(e.into()),
    })?;
    {
        let mut dedup = run.dedup.lock().expect("dedup lock");
        if dedup.contains(&upload_id) {
            drop(dedup);
            return Ok(duplicate(s, run, worker_id));
        }
        room.ingest(batch).map_err(|_| ApiError::Busy)?;
        dedup.insert(upload_id);
    }
    s.fleet.lock().expect("fleet lock").touch(worker_id, Some(&run.name), count, Instant::now());
    s.metrics.accepted(&run.name, count);
    // How stale the data is: versions between the model that played it and the latest.
    let age = run.registry.latest_version().unwrap_or(0).saturating_sub(played_by);
    run.age_sum.fetch_add(age.saturating_mul(count), Relaxed);
    run.age_count.fetch_add(count, Relaxed);
    s.metrics.uploads.with_label_values(&[&run.name]).inc();
    Ok((StatusCode::ACCEPTED, Json(UploadReply { accepted: count, duplicate: false })).into_response())
}
