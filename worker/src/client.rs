//! A typed client for the manager's HTTP API (`docs/api.md`, version 1).
//!
//! One method per route the worker uses; the messages are `shine_agent::protocol`'s. Errors say whether retrying can help:
//! [`ApiError::is_retryable`] is true for network failures, 5xx and 429, false for the
//! other 4xx, which carry the manager's own message from its JSON error body.

use shine_agent::protocol::{
    EpisodeReport, EpisodesRequest, ErrorBody, Heartbeat, HeartbeatReply, LeagueMatch, LeagueResult, LiveBatch, RegisterRequest, Registration, UploadReply,
    WatchReply,
};
use std::time::Duration;
use thiserror::Error;

/// `GET /api/v1/models/latest` with an ETag.
#[derive(Debug)]
pub enum ModelFetch {
    /// The model we have is still the latest (304).
    NotModified,
    /// No model published yet (404).
    NoneYet,
    Model {
        bytes: Vec<u8>,
        etag: Option<String>,
        version: Option<u64>,
    },
}

#[derive(Debug, Error)]
pub enum ApiError {
    #[error("cannot reach the manager at {url}: {source}")]
    Network { url: String, source: reqwest::Error },
    #[error("the manager answered {status} to {what}: {message} ({code})")]
    Status { what: &'static str, status: u16, code: String, message: String },
    #[error("the manager's answer to {what} is not what docs/api.md says: {detail}")]
    Protocol { what: &'static str, detail: String },
}

impl ApiError {
    /// Network errors, 5xx (503: the ingest queue is full) and 429 may pass.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Network { .. } | ApiError::Protocol { .. } => true,
            ApiError::Status { status, .. } => *status >= 500 || *status == 429,
        }
    }
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: reqwest::Url,
    token: String,
    /// The run whose routes (`/api/v1/runs/{run}/...`) registration, uploads, episodes
    /// and models use; `None`: the routes without a run (registration then lets the
    /// manager assign one).
    run: Option<String>,
}

impl Client {
    /// `base` is the manager's address, e.g. `http://manager:8080`.
    pub fn new(base: &str, token: &str) -> anyhow::Result<Client> {
        let base = reqwest::Url::parse(base.trim_end_matches('/'))
            .map_err(|e| anyhow::anyhow!("--manager {base:?} is not a URL ({e}): give one like http://manager:8080"))?;
        if !matches!(base.scheme(), "http" | "https") {
            anyhow::bail!("--manager {base} must start with http:// or https://");
        }
        // reqwest is built without a default crypto provider (no aws-lc: slow to build,
        // needs cmake); install ring's. An error means one is installed already: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("shine-worker/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(5))
            // Long enough for a 32 MiB upload on a slow link; a hung manager is retried.
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Client { http, base, token: token.to_string(), run: None })
    }

    /// The same client for `run`'s routes (`None` or empty: the routes without a run).
    pub fn with_run(mut self, run: Option<&str>) -> Client {
        self.run = run.filter(|r| !r.is_empty()).map(str::to_string);
        self
    }

    /// `path` (e.g. `/experience`) under the run's routes.
    fn run_url(&self, path: &str) -> String {
        match &self.run {
            Some(run) => self.url(&format!("/api/v1/runs/{run}{path}")),
            None => self.url(&format!("/api/v1{path}")),
        }
    }

    pub fn base(&self) -> &reqwest::Url {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base.as_str().trim_end_matches('/'))
    }

    async fn send(&self, what: &'static str, req: reqwest::RequestBuilder) -> Result<reqwest::Response, ApiError> {
        let resp = req.send().await.map_err(|source| ApiError::Network { url: self.base.to_string(), source })?;
        let status = resp.status();
        if status.is_success() || status == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(resp);
        }
        let body = resp.text().await.unwrap_or_default();
        let (code, message) = match serde_json::from_str::<ErrorBody>(&body) {
            Ok(b) => (b.error.code, b.error.message),
            Err(_) => ("unknown".into(), if body.is_empty() { status.canonical_reason().unwrap_or("").to_string() } else { body.chars().take(300).collect() }),
        };
        Err(ApiError::Status { what, status: status.as_u16(), code, message })
    }

    async fn json<T: serde::de::DeserializeOwned>(what: &'static str, resp: reqwest::Response) -> Result<T, ApiError> {
        let body = resp.bytes().await.map_err(|e| ApiError::Protocol { what, detail: e.to_string() })?;
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::Protocol { what, detail: format!("{e}: {}", String::from_utf8_lossy(&body[..body.len().min(300)])) })
    }

    pub async fn register(&self, req: &RegisterRequest) -> Result<Registration, ApiError> {
        let what = "registration (POST /api/v1/workers)";
        let resp = self.send(what, self.http.post(self.run_url("/workers")).bearer_auth(&self.token).json(req)).await?;
        Self::json(what, resp).await
    }

    pub async fn heartbeat(&self, worker_id: u32, hb: &Heartbeat) -> Result<HeartbeatReply, ApiError> {
        let what = "a heartbeat";
        let resp = self.send(what, self.http.post(self.url(&format!("/api/v1/workers/{worker_id}/heartbeat"))).bearer_auth(&self.token).json(hb)).await?;
        Self::json(what, resp).await
    }

    pub async fn episodes(&self, worker_id: u32, episodes: Vec<EpisodeReport>) -> Result<(), ApiError> {
        let req = EpisodesRequest { worker_id, episodes };
        self.send("an episode report", self.http.post(self.run_url("/episodes")).bearer_auth(&self.token).json(&req)).await?;
        Ok(())
    }

    /// Long poll: whether a browser watches this worker, answered as soon as one does
    /// or after `wait_secs` with false.
    pub async fn live_wait(&self, worker_id: u32, wait_secs: f64) -> Result<bool, ApiError> {
        let what = "a live-view poll";
        let url = self.url(&format!("/api/v1/workers/{worker_id}/live?wait_secs={wait_secs}"));
        let resp = self.send(what, self.http.get(url).bearer_auth(&self.token)).await?;
        Ok(Self::json::<WatchReply>(what, resp).await?.watch)
    }

    /// Post live frames; the answer says whether anyone still watches.
    pub async fn live_frames(&self, worker_id: u32, batch: &LiveBatch) -> Result<bool, ApiError> {
        let what = "live frames";
        let url = self.url(&format!("/api/v1/workers/{worker_id}/live"));
        let resp = self.send(what, self.http.post(url).bearer_auth(&self.token).json(batch)).await?;
        Ok(Self::json::<WatchReply>(what, resp).await?.watch)
    }

    /// Upload one encoded batch (the wire format, as spooled).
    pub async fn upload(&self, batch: Vec<u8>) -> Result<UploadReply, ApiError> {
        let what = "an experience upload";
        let req =
            self.http.post(self.run_url("/experience")).bearer_auth(&self.token).header(reqwest::header::CONTENT_TYPE, "application/octet-stream").body(batch);
        let resp = self.send(what, req).await?;
        // A 2xx means the manager has the batch, whatever its body says: never resend
        // it because of an unreadable answer.
        Ok(Self::json(what, resp).await.unwrap_or_else(|e| {
            tracing::warn!("{e}; counting the batch as accepted");
            UploadReply { accepted: 0, duplicate: false }
        }))
    }

    /// The versions of the run's kept models, newest first (`GET .../models`).
    pub async fn model_versions(&self) -> Result<Vec<u64>, ApiError> {
        #[derive(serde::Deserialize)]
        struct Listed {
            version: u64,
        }
        #[derive(serde::Deserialize)]
        struct List {
            models: Vec<Listed>,
        }
        let what = "the model list (GET /api/v1/models)";
        let resp = self.send(what, self.http.get(self.run_url("/models")).bearer_auth(&self.token)).await?;
        Ok(Self::json::<List>(what, resp).await?.models.into_iter().map(|m| m.version).collect())
    }

    /// One kept model's file (`GET .../models/{version}`).
    pub async fn model(&self, version: u64) -> Result<Vec<u8>, ApiError> {
        let resp = self.send("a model download", self.http.get(self.run_url(&format!("/models/{version}"))).bearer_auth(&self.token)).await?;
        Ok(resp.bytes().await.map_err(|source| ApiError::Network { url: self.base.to_string(), source })?.to_vec())
    }

    /// A league match to play (`None`: the manager has none now, 204).
    pub async fn league_match(&self) -> Result<Option<LeagueMatch>, ApiError> {
        let what = "a league match (POST /api/v1/league/matches)";
        let resp = self.send(what, self.http.post(self.url("/api/v1/league/matches")).bearer_auth(&self.token)).await?;
        if resp.status() == reqwest::StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(Self::json(what, resp).await?))
    }

    /// A league match's result.
    pub async fn league_result(&self, result: &LeagueResult) -> Result<(), ApiError> {
        self.send("a league result (POST /api/v1/league/results)", self.http.post(self.url("/api/v1/league/results")).bearer_auth(&self.token).json(result)).await?;
        Ok(())
    }

    /// A file the manager names by its path (a league match's model `url`). Without a
    /// token (empty), no `Authorization` header: a manager's reads are public unless it
    /// says otherwise.
    pub async fn file(&self, path: &str) -> Result<Vec<u8>, ApiError> {
        let req = self.http.get(self.url(path));
        let req = if self.token.is_empty() { req } else { req.bearer_auth(&self.token) };
        let resp = self.send("a model download", req).await?;
        Ok(resp.bytes().await.map_err(|source| ApiError::Network { url: self.base.to_string(), source })?.to_vec())
    }

    /// The latest model, unless `etag` still names it.
    pub async fn latest_model(&self, etag: Option<&str>) -> Result<ModelFetch, ApiError> {
        let mut req = self.http.get(self.run_url("/models/latest")).bearer_auth(&self.token);
        if let Some(tag) = etag {
            req = req.header(reqwest::header::IF_NONE_MATCH, tag);
        }
        let resp = match self.send("a model download", req).await {
            Err(ApiError::Status { status: 404, .. }) => return Ok(ModelFetch::NoneYet),
            r => r?,
        };
        if resp.status() == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(ModelFetch::NotModified);
        }
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let etag = header("etag");
        let version = header("x-shine-model-version").and_then(|v| v.parse().ok());
        let bytes = resp.bytes().await.map_err(|source| ApiError::Network { url: self.base.to_string(), source })?.to_vec();
        Ok(ModelFetch::Model { bytes, etag, version })
    }
}

/// The file at `url`, a whole http(s) address (`play --model http://manager:8080/api/v1/models/latest`),
/// with `token` if given, as [`Client::file`] fetches it; on a runtime of its own, for
/// the commands that have none (`play`, `eval`).
pub fn download(url: &str, token: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let parsed = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("{url:?} is not an address ({e})"))?;
    let path = match parsed.query() {
        Some(q) => format!("{}?{q}", parsed.path()),
        None => parsed.path().to_string(),
    };
    let client = Client::new(&parsed.origin().ascii_serialization(), token.unwrap_or(""))?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(client.file(&path)).map_err(|e| match e.status() {
        Some(401) => anyhow::Error::new(e).context("the manager keeps its reads private (public_reads = false): pass its token with --token or SHINE_TOKEN"),
        _ => e.into(),
    })
}
