//! The rest of docs/api.md over real HTTP: workers, episodes, models, stats, health,
//! metrics, access control, error bodies.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_register_on_an_epsilon_ladder_and_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    // Long enough that a loaded machine's pauses between a's heartbeats (every 0.3 s
    // here) never reach it, and still the test's whole length (b must time out); the
    // exact timing is the fleet unit tests' job (they inject the clock).
    cfg.workers.worker_timeout_secs = 10.0;
    let m = Manager::start(cfg).await;
    let info = json!({ "host": "vm-1", "backend": "sim", "envs": 2, "version": "0.1.0" });

    let (st, a) = m.post_json("/api/v1/workers", &info).await;
    assert_eq!(st, 201, "{a}");
    assert_eq!(a["epsilon"], 0.4);
    assert_eq!(a["action_set"], "untouchable");
    assert_eq!(a["task"], "untouchable");
    assert_eq!(a["n_step"], 1);
    assert_eq!(a["upload_every_transitions"], 2000);
    assert_eq!(a["cpu_level"], 9);
    for key in ["gamma", "upload_every_secs", "model_poll_secs", "heartbeat_secs", "eval_share", "cpu_level_top_share"] {
        assert!(a[key].is_number(), "registration has {key}: {a}");
    }
    let (_, b) = m.post_json("/api/v1/workers", &info).await;
    assert_ne!(a["worker_id"], b["worker_id"]);
    assert!((b["epsilon"].as_f64().unwrap() - 0.4f64.powi(8)).abs() < 1e-9, "second of two is the greedy end: {b}");

    // a's heartbeat: its epsilon, no live view yet.
    let (st, hb) = m
        .post_json(&format!("/api/v1/workers/{}/heartbeat", a["worker_id"]), &json!({ "frames": 10, "env_fps": 5000.0, "episodes": 1, "model_version": 1 }))
        .await;
    assert_eq!((st, hb["epsilon"].as_f64(), hb["watch"].as_bool()), (200, Some(0.4), Some(false)));
    let (st, err) = m.post_json("/api/v1/workers/9999/heartbeat", &json!({})).await;
    assert_eq!((st, err["error"]["code"].as_str()), (404, Some("not_found")));
    let listed = m.get_json("/api/v1/workers").await;
    assert_eq!(listed["workers"].as_array().unwrap().len(), 2);
    assert_eq!(listed["workers"][0]["frames"], 10);
    assert!(metric(&m.metrics().await, "shine_workers{run=\"default\"}") == Some(2.0));

    // b goes silent, a keeps beating: b's slot is freed and a new worker takes it.
    // (Only a's heartbeats and read-only lists until b is gone: b's own would keep it.)
    let deadline = std::time::Instant::now() + HANG;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (st, _) = m.post_json(&format!("/api/v1/workers/{}/heartbeat", a["worker_id"]), &json!({})).await;
        assert_eq!(st, 200, "a keeps beating, so it stays registered");
        let listed = m.get_json("/api/v1/workers").await;
        let state_of = |id: &Value| listed["workers"].as_array().unwrap().iter().find(|w| w["worker_id"] == *id).map(|w| w["state"].clone());
        assert_eq!(state_of(&a["worker_id"]), Some(json!("live")));
        if state_of(&b["worker_id"]) == Some(json!("gone")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "b was never marked gone: {listed}");
    }
    let (st, _) = m.post_json(&format!("/api/v1/workers/{}/heartbeat", b["worker_id"]), &json!({})).await;
    assert_eq!(st, 404, "b timed out and must register again");
    let (_, c) = m.post_json("/api/v1/workers", &info).await;
    let listed = m.get_json("/api/v1/workers").await;
    let slot_of = |id: &Value| listed["workers"].as_array().unwrap().iter().find(|w| w["worker_id"] == *id).unwrap()["slot"].clone();
    assert_eq!(slot_of(&c["worker_id"]), 1, "b's slot reused");
    assert_eq!(slot_of(&a["worker_id"]), 0);
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_feed_the_stats_and_rank_the_models() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let latest = m.get_json("/api/v1/models").await["latest"].as_u64().unwrap();
    let ep = |reward: f64, survived: bool, eval: bool| json!({ "frames": 3600, "reward": reward, "survived": survived, "eval": eval, "cpu_level": 9, "model_version": latest });
    let (st, r) = m
        .post_json("/api/v1/episodes", &json!({ "worker_id": 1, "episodes": [ep(10.0, true, false), ep(20.0, false, false), ep(50.0, true, true), ep(0.0, false, true), ep(60.0, true, true), ep(60.0, true, true)] }))
        .await;
    assert_eq!((st, r["accepted"].as_u64()), (200, Some(6)));
    let c = m.wait_for("episode stats in a sample", |c| !c["eval_survival"].is_null()).await;
    assert_eq!(c["episode_reward"], 15.0);
    assert_eq!(c["train_survival"], 0.5);
    assert_eq!(c["eval_survival"], 0.75);
    let stats = m.get_json("/api/v1/stats").await;
    assert_eq!(stats["eval_episodes_total"], 4);
    // The sampler (every 0.1 s here) puts it into the time series.
    until("eval survival in the time series", async || {
        m.get_json("/api/v1/stats").await["series"].as_array().unwrap().iter().any(|s| s["eval_survival"] == 0.75)
    })
    .await;
    let models = m.get_json("/api/v1/models").await;
    assert_eq!(models["models"][0]["version"], latest);
    assert_eq!(models["models"][0]["eval_survival"], 0.75, "attached to the model it was measured on");
    assert_eq!(models["models"][0]["eval_episodes"], 4);

    // Bad input changes nothing.
    let (st, err) = m.post_json("/api/v1/episodes", &json!({ "worker_id": 1, "episodes": [ep(1.0, true, true), { "frames": 1 }] })).await;
    assert_eq!((st, err["error"]["code"].as_str()), (422, Some("invalid_json")), "{err}");
    let r = m.http.post(m.at("/api/v1/episodes")).bearer_auth(TOKEN).header("content-type", "application/json").body("{not json").send().await.unwrap();
    assert_eq!(r.status(), 400);
    let err: Value = r.json().await.unwrap();
    assert_eq!(err["error"]["code"], "bad_json");
    let r = m.http.post(m.at("/api/v1/episodes")).json(&json!({ "episodes": [ep(1.0, true, true)] })).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(m.get_json("/api/v1/stats").await["eval_episodes_total"], 4);
    assert_eq!(m.get_json("/api/v1/models").await["models"][0]["eval_episodes"], 4);
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_download_with_etags_and_the_service_reports_itself() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;

    // A fresh trainer publishes version 1 (random weights) before serving.
    let r = m.http.get(m.at("/api/v1/models/latest")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert!(etag.len() == 34 && etag.starts_with('"') && etag.ends_with('"'), "a quoted 128-bit hash: {etag}");
    assert_eq!(r.headers()["x-shine-model-version"], "1");
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    let file = r.bytes().await.unwrap();
    let net = shine_agent::model::QNet::load(&file).expect("a loadable model file");
    assert_eq!(net.meta().model_version, 1);
    assert_eq!(net.meta().action_set, "untouchable");
    assert!(dir.path().join("runs/default/models").read_dir().unwrap().any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".safetensors")));

    assert_eq!(etag, shine_manager::storage::registry::etag_of(&file), "derived from the bytes");
    let r = m.http.get(m.at("/api/v1/models/1")).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(r.status(), 304);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = m.http.get(m.at("/api/v1/models/1")).header("if-none-match", "\"v0\"").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.unwrap() == file);
    for bad in ["/api/v1/models/77", "/api/v1/models/abc", "/api/v1/nothing"] {
        let r = m.http.get(m.at(bad)).send().await.unwrap();
        assert_eq!(r.status(), 404, "{bad}");
        let err: Value = r.json().await.unwrap();
        assert_eq!(err["error"]["code"], "not_found");
    }
    let list = m.get_json("/api/v1/models").await;
    assert_eq!(list["models"][0]["url"], "/api/v1/models/1");
    assert_eq!(list["models"][0]["bytes"], file.len() as u64);

    let r = m.http.get(m.at("/healthz")).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.text().await.unwrap()), (200, "ok".to_string()));
    let text = m.metrics().await;
    for name in [
        "shine_transitions_accepted_total",
        "shine_transitions_inserted_total",
        "shine_transitions_sampled_total",
        "shine_experiences_total",
        "shine_train_steps_total",
        "shine_model_version",
        "shine_replay_size",
        "shine_workers",
    ] {
        assert!(metric(&text, &format!("{name}{{run=\"default\"}}")).is_some(), "{name} missing:\n{text}");
    }
    assert_eq!(metric(&text, "shine_model_version{run=\"default\"}"), Some(1.0));
    // On the CPU no CUDA graph is captured, and the device's memory is the process's.
    assert_eq!(metric(&text, "shine_graph_captures_total{run=\"default\"}"), Some(0.0), "{text}");
    assert!(!text.contains("shine_device_allocated_bytes{"), "no device memory on the CPU:\n{text}");
    let stats = m.get_json("/api/v1/stats").await;
    for key in ["accepted_per_sec", "train_steps_per_sec", "loss", "mean_q", "replay_fill", "samples_per_insert", "model_version", "eval_survival"] {
        assert!(stats["current"].get(key).is_some(), "stats lack {key}: {stats}");
    }
    // Two samples (one every 0.1 s), however long this machine takes to make them.
    until("two samples in the series", async || m.get_json("/api/v1/stats").await["series"].as_array().unwrap().len() >= 2).await;
    let stats = m.get_json("/api/v1/stats").await;
    let series = stats["series"].as_array().unwrap();
    assert!(series.len() >= 2, "sampled every 0.1 s");
    let t1 = series[series.len() - 2]["t"].as_f64().unwrap();
    let newer = m.get_json(&format!("/api/v1/stats?since={t1}")).await;
    // Only the samples after t1: the last one read above first (more may have come).
    let newer = newer["series"].as_array().unwrap();
    assert_eq!(newer.first().map(|s| &s["t"]), Some(&series[series.len() - 1]["t"]), "since filters");
    assert!(newer.iter().all(|s| s["t"].as_f64().unwrap() > t1));
    let r = m.http.get(m.at("/api/v1/stats?since=yesterday")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "bad_query");
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_reads_need_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.public_reads = false;
    let m = Manager::start(cfg).await;
    for path in ["/api/v1/models", "/api/v1/models/latest", "/api/v1/stats", "/metrics"] {
        let r = m.http.get(m.at(path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let r = m.http.get(m.at(path)).bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    assert_eq!(m.http.get(m.at("/healthz")).send().await.unwrap().status(), 200, "health stays open for probes");
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_gets_the_json_error_body_and_bearer_is_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let r = m.http.get(m.at("/api/v1/experience")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "POST", "the allowed method is named");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("not allowed"), "{body}");

    // RFC 7235: the scheme name is case-insensitive.
    for (seed, scheme) in [(41, "bearer"), (42, "BEARER"), (43, "Bearer")] {
        let r = m
            .http
            .post(m.at("/api/v1/experience"))
            .header("authorization", format!("{scheme} {TOKEN}"))
            .header("content-type", "application/octet-stream")
            .body(batch(10, seed))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "{scheme}");
    }
    let r = m.http.post(m.at("/api/v1/experience")).header("authorization", format!("Basic {TOKEN}")).body(batch(10, 1)).send().await.unwrap();
    assert_eq!(r.status(), 401, "another scheme is not a bearer token");
    m.stop().await.unwrap();
}

/// `route`'s path with its parameters filled in: `{run}` as `run`, any other as `1`.
fn filled(path: &str, run: &str) -> String {
    path.split('/')
        .map(|seg| {
            if seg == "{run}" {
                run
            } else if seg.starts_with('{') {
                "1"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every route the router serves (`api::served`, the list the router is built from),
/// every method it takes (GET with HEAD), on a run that exists and on one that does
/// not: a token route answers 401 to a caller without the token (none, a wrong one, or
/// only `?token=`) before anything else, so a stranger never learns which runs exist;
/// a read follows `public_reads`; with access, a run that does not exist is 404 naming
/// the runs; a method no route takes is 405 whoever asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_token_route_answers_401_before_404_whatever_the_method() {
    use shine_manager::api::{served, Access};
    let routes = served(1 << 20);
    // The router's own list, whole: the token routes of docs/api.md among them.
    let token: Vec<String> = routes.iter().filter(|r| r.access == Access::Token).map(|r| format!("{} {}", r.method, r.path)).collect();
    for known in ["GET /api/v1/runs/{run}/workers/{id}/live", "POST /api/v1/experience", "DELETE /api/v1/runs/{run}", "POST /api/v1/league/results"] {
        assert!(token.contains(&known.to_string()), "{known} is a token route: {token:?}");
    }
    for public_reads in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(dir.path());
        cfg.server.public_reads = public_reads;
        let m = Manager::start(cfg).await;
        for route in &routes {
            let runs: &[&str] = if route.path.contains("{run}") { &["default", "nope"] } else { &["default"] };
            let mut methods = vec![route.method.as_str()];
            if route.method == "GET" {
                methods.push("HEAD");
            }
            for (run, method) in runs.iter().flat_map(|r| methods.iter().map(move |m| (*r, *m))) {
                let path = filled(&route.path, run);
                let what = format!("{method} {path} ({:?}, public_reads = {public_reads})", route.access);
                let send = |token: Option<&str>, query: bool| {
                    let url = if query { format!("{}{path}?token={TOKEN}", m.url) } else { format!("{}{path}", m.url) };
                    let mut rq = m.http.request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
                    if let Some(t) = token {
                        rq = rq.bearer_auth(t);
                    }
                    async move {
                        let r = rq.send().await.unwrap();
                        let status = r.status().as_u16();
                        (status, r.text().await.unwrap())
                    }
                };
                let refused = |(status, _): &(u16, String)| *status == 401;
                let (none, wrong, query) = (send(None, false).await, send(Some("wrong"), false).await, send(None, true).await);
                match route.access {
                    Access::Token => {
                        for (how, answer) in [("no token", &none), ("a wrong token", &wrong), ("the token as ?token=", &query)] {
                            assert!(refused(answer), "{what} with {how}: {answer:?}");
                        }
                    }
                    Access::Read => {
                        assert_eq!(refused(&none), !public_reads, "{what} without the token: {none:?}");
                        assert!(!refused(&query), "{what} with ?token=: {query:?}");
                    }
                    Access::Open => assert!(!refused(&none), "{what}: {none:?}"),
                }
                // With the token: served (not the router's fallback), and a run that
                // does not exist is 404 naming the runs there are.
                let (status, body) = send(Some(TOKEN), false).await;
                assert_ne!(status, 401, "{what} with the token: {body}");
                assert!(!body.contains("no such route"), "{what} is served: {body}");
                if run == "nope" && route.path.starts_with("/api/v1/runs/{run}") && method != "HEAD" {
                    assert!(status == 404 && body.contains("not_found") && body.contains("default"), "{what}: {status} {body}");
                }
            }
            // A method the path does not take: 405 whoever asks.
            for token in [None, Some(TOKEN)] {
                let path = filled(&route.path, "nope");
                let mut rq = m.http.request(reqwest::Method::PUT, m.at(&path));
                if let Some(t) = token {
                    rq = rq.bearer_auth(t);
                }
                assert_eq!(rq.send().await.unwrap().status(), 405, "PUT {path}");
            }
        }
        m.stop().await.unwrap();
    }
}

/// docs/api.md's route headings say each route's access as the router applies it: every
/// route a heading names is served, marked `(token)` exactly when it is a token route,
/// and every token route has a heading.
#[test]
fn the_api_docs_mark_exactly_the_token_routes() {
    use shine_manager::api::{served, Access};
    let routes = served(1 << 20);
    let doc = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md")).unwrap();
    let mut documented = Vec::new();
    for heading in doc.lines().filter(|l| l.starts_with("### ")) {
        for item in heading.split('`').skip(1).step_by(2) {
            let (method, path) = item.split_once(' ').unwrap_or_else(|| panic!("{heading}: `{item}` is not METHOD PATH"));
            let path = path.split(['?', '[']).next().unwrap();
            let route = routes.iter().find(|r| r.method == method && r.path == path).unwrap_or_else(|| panic!("{heading}: {method} {path} is not served"));
            assert_eq!(heading.contains("(token)"), route.access == Access::Token, "{heading}: {method} {path} is {:?}", route.access);
            documented.push((method.to_string(), path.to_string()));
        }
    }
    for r in routes.iter().filter(|r| r.access == Access::Token && !r.in_run) {
        assert!(documented.contains(&(r.method.to_string(), r.path.clone())), "{} {} has no heading in docs/api.md", r.method, r.path);
    }
}
