//! A real manager on 127.0.0.1:0 (real trainer on the CPU, small replay, tiny burn-in)
//! and a real HTTP client.
#![allow(dead_code)]

use futures_util::StreamExt;
use serde_json::{json, Value};
use shine_agent::experience::{self, col, BatchMeta, TRANSITION_FLOATS};
use shine_manager::config::Config;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::{self, Message};

pub mod serving;

pub const TOKEN: &str = "test-token";

#[allow(unused_imports)] // not every test file reads metrics
pub use shine_testkit::{metric, HANG};

/// The test config `small.toml` (testkit/configs: trains within a second of a few
/// hundred uploaded transitions) with its data in `data_dir` and the token [`TOKEN`];
/// each test changes what it tests on it.
pub fn config(data_dir: &Path) -> Config {
    let mut c = Config::from_file(&shine_testkit::manager::config("small.toml")).unwrap();
    c.server.data_dir = data_dir.to_path_buf();
    c.server.token = Some(TOKEN.into());
    c
}

/// A manager served in this process ([`serving::Serving`]) and an HTTP client for it.
pub struct Manager {
    pub url: String,
    pub http: reqwest::Client,
    serving: serving::Serving,
}

impl Manager {
    /// Serve `config` on 127.0.0.1:0 on this test's runtime; once it answers.
    pub async fn start(config: Config) -> Manager {
        let serving = serving::Serving::spawn(&tokio::runtime::Handle::current(), config).unwrap();
        let http = reqwest::Client::new();
        tokio::time::timeout(HANG, serving.healthy(&http)).await.expect("the manager did not come up").unwrap();
        Manager { url: serving.url.clone(), http, serving }
    }

    /// Graceful shutdown (final checkpoint); the run's result.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.serving.stop().await
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{}", self.url, path)
    }

    pub async fn upload_with(&self, body: Vec<u8>, token: Option<&str>, content_type: Option<&str>) -> (u16, Value) {
        let mut rq = self.http.post(self.at("/api/v1/experience")).body(body);
        if let Some(t) = token {
            rq = rq.bearer_auth(t);
        }
        if let Some(ct) = content_type {
            rq = rq.header("content-type", ct);
        }
        let r = rq.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("body is not JSON: {text:?}")))
    }

    pub async fn upload(&self, body: Vec<u8>) -> (u16, Value) {
        self.upload_with(body, Some(TOKEN), Some("application/octet-stream")).await
    }

    pub async fn get_json(&self, path: &str) -> Value {
        let r = self.http.get(self.at(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self.http.post(self.at(path)).bearer_auth(TOKEN).json(body).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `current` of GET /api/v1/stats.
    pub async fn current(&self) -> Value {
        self.get_json("/api/v1/stats").await["current"].clone()
    }

    /// Poll the stats until `f` holds (or panic after [`HANG`]).
    pub async fn wait_for(&self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + HANG;
        loop {
            let c = self.current().await;
            if f(&c) {
                return c;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; last stats: {c}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn metrics(&self) -> String {
        self.http.get(self.at("/metrics")).send().await.unwrap().text().await.unwrap()
    }
}

/// Poll `f` until it holds (or panic after [`HANG`]).
pub async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + HANG;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` valid transitions (actions of the 5-action "untouchable" set), distinct per `seed`.
pub fn rows(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .flat_map(|i| {
            let mut t: Vec<f32> = (0..TRANSITION_FLOATS).map(|c| ((i * 31 + c * 7 + seed as usize) % 97) as f32 / 97.0).collect();
            t[col::ACTION] = (i % 5) as f32;
            t[col::REWARD] = if i % 3 == 0 { 1.0 / 60.0 } else { 0.0 };
            t[col::TERMINAL] = (i % 50 == 49) as u8 as f32;
            t
        })
        .collect()
}

pub fn batch(n: usize, seed: u32) -> Vec<u8> {
    let mut upload_id = [0u8; 16];
    upload_id[..4].copy_from_slice(&seed.to_le_bytes());
    upload_id[15] = 0xAB;
    let meta = BatchMeta { worker_id: 1, model_version: 1, n_step: 1, upload_id };
    experience::encode(&meta, &rows(n, seed), seed.is_multiple_of(2))
}


// ------------------------------------------------------------ live match helpers

pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn connect(m: &Manager, path: &str) -> Result<Ws, tungstenite::Error> {
    let url = format!("{}{path}", m.url.replace("http://", "ws://"));
    tokio_tungstenite::connect_async(url).await.map(|(ws, _)| ws)
}

/// The next text message (skipping pings), as JSON; panics after [`HANG`].
pub async fn next_json(ws: &mut Ws) -> Value {
    loop {
        match tokio::time::timeout(HANG, ws.next()).await.expect("a message in time").expect("socket open").unwrap() {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

pub fn frame(n: u32) -> Value {
    let p = |x: f32| json!({ "x": x, "y": 0.0, "facing": 1.0, "action": 14, "action_name": "Wait", "percent": 12.0, "stocks": 4 });
    json!({ "frame": n, "agent": p(n as f32), "opponent": p(-10.0), "action": 1, "q": [0.1, 0.9, -0.2, 0.0, 0.3], "explored": false })
}

pub fn frames(from: u32, n: u32) -> Value {
    json!({ "actions": ["nothing", "shine", "spot_dodge", "roll_left", "roll_right"], "model_version": 3, "cpu_level": 9, "eval": false,
            "frames": (from..from + n).map(frame).collect::<Vec<_>>() })
}

pub async fn register(m: &Manager) -> u64 {
    let (st, r) = m.post_json("/api/v1/workers", &json!({ "host": "test-host", "backend": "sim", "envs": 1 })).await;
    assert_eq!(st, 201);
    r["worker_id"].as_u64().unwrap()
}
