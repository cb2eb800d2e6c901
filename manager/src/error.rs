//! The API's one error type: each variant names its HTTP status, and every error goes
//! out as `{"error": {"code", "message"}}` (docs/api.md). A 5xx tells the client only
//! "internal error"; the cause is logged once, here, inside the request's span.

use crate::run::{Refusal, RunError};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use shine_agent::experience::WireError;
use shine_agent::protocol::{ErrorBody, ErrorDetail};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: no bearer token, or the wrong one.
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 400: bad JSON, a malformed request.
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    /// 413: the body is over the limit.
    #[error("body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// 415.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: well-formed but invalid content.
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    /// 400 or 422 by what is wrong with an experience upload.
    #[error(transparent)]
    Upload(#[from] WireError),
    /// 503: the trainer's ingest queue is full; retry with backoff.
    #[error("the trainer's ingest queue is full: retry later")]
    Busy,
    /// 503: the disk is full; the upload was not kept (retry later).
    #[error("{0}")]
    StorageFull(String),
    /// 503: the run is paused; the upload was not kept (retry after it resumes).
    #[error("{}", Refusal::Paused(.0.clone()))]
    RunPaused(String),
    /// 409: the request conflicts with the runs as they are.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// 405: the route exists, the method does not.
    #[error("this method is not allowed on this route (the Allow header lists those that are)")]
    MethodNotAllowed,
    /// 500; the cause is logged, never sent.
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Upload(e) => upload_status(e),
            ApiError::Busy | ApiError::StorageFull(_) | ApiError::RunPaused(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The machine-readable `code` of the body.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized => "unauthorized",
            ApiError::NotFound(_) => "not_found",
            ApiError::BadRequest { code, .. } | ApiError::Unprocessable { code, .. } => code,
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Upload(e) => upload_code(e),
            ApiError::Busy => "busy",
            ApiError::StorageFull(_) => "storage_full",
            ApiError::RunPaused(_) => "run_paused",
            ApiError::Conflict { code, .. } => code,
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Internal(_) => "internal",
        }
    }

    /// The label of `shine_uploads_rejected_total{reason}` for a rejected upload.
    pub fn reject_reason(&self) -> &'static str {
        match self {
            ApiError::Upload(e) => e.reason(),
            ApiError::Unauthorized => "auth",
            ApiError::PayloadTooLarge { .. } => "oversized",
            ApiError::UnsupportedMediaType(_) => "content_type",
            ApiError::Busy => "busy",
            ApiError::StorageFull(_) => "storage_full",
            ApiError::RunPaused(_) => "run_paused",
            _ => "other",
        }
    }
}

/// Malformed framing is 400; a well-formed upload whose content does not fit (dims,
/// counts, values) is 422 (docs/api.md).
fn upload_status(e: &WireError) -> StatusCode {
    use WireError::*;
    match e {
        Truncated(_) | BadMagic(_) | BadVersion(_) | BadFlags(_) | Reserved | PayloadLength { .. } | Compression(_) => StatusCode::BAD_REQUEST,
        BadDims(_) | BadNStep { .. } | BadCount(_) | CountMismatch { .. } | NotFinite { .. } | BadAction { .. } | BadTerminal { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
    }
}

fn upload_code(e: &WireError) -> &'static str {
    use WireError::*;
    match e {
        Truncated(_) => "truncated",
        BadMagic(_) => "bad_magic",
        BadVersion(_) => "bad_version",
        BadFlags(_) => "bad_flags",
        Reserved => "reserved_not_zero",
        PayloadLength { .. } => "payload_length",
        Compression(_) => "bad_compression",
        BadDims(_) => "bad_dims",
        BadNStep { .. } => "bad_n_step",
        BadCount(_) => "bad_count",
        CountMismatch { .. } => "count_mismatch",
        NotFinite { .. } => "not_finite",
        BadAction { .. } => "bad_action",
        BadTerminal { .. } => "bad_terminal",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            ApiError::Internal(e) => {
                // The one place a 5xx's cause is logged; the client learns nothing of it.
                tracing::error!(error = format!("{e:#}"), "internal error");
                "internal error".to_string()
            }
            other => other.to_string(),
        };
        let body = ErrorBody { error: ErrorDetail { code: self.code().into(), message } };
        let mut resp = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// An upload the run layer refused, as the API answers it.
impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Paused(run) => ApiError::RunPaused(run),
            Refusal::Format(e) => ApiError::Upload(e),
            Refusal::Busy => ApiError::Busy,
            Refusal::StorageFull(m) => ApiError::StorageFull(m),
            Refusal::Internal(e) => ApiError::Internal(e),
        }
    }
}

/// A run that could not be found, created or deleted, as the API answers it.
impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        let message = e.to_string();
        match e {
            RunError::NotFound { .. } => ApiError::NotFound(message),
            RunError::Invalid(_) => ApiError::Unprocessable { code: "invalid_run", message },
            RunError::Exists(_) => ApiError::Conflict { code: "run_exists", message },
            RunError::ConfirmRequired(_) => ApiError::BadRequest { code: "confirm_required", message },
            RunError::DeclaredInConfig(_) => ApiError::Conflict { code: "declared_in_config", message },
            RunError::Internal(e) => ApiError::Internal(e),
        }
    }
}
