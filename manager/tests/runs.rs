//! Runs through the API against a real manager: create, settings on top of the
//! manager's, uploads per run, pause and resume, assignment of workers, delete, and a
//! created run that outlives a restart.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

async fn send(m: &Manager, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut rq = m.http.request(method, m.at(path)).bearer_auth(TOKEN);
    if let Some(b) = body {
        rq = rq.json(&b);
    }
    let r = rq.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn upload_to(m: &Manager, run: &str, body: Vec<u8>) -> (u16, Value) {
    let r = m
        .http
        .post(m.at(&format!("/api/v1/runs/{run}/experience")))
        .bearer_auth(TOKEN)
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn inserted(m: &Manager, run: &str) -> u64 {
    m.get_json(&format!("/api/v1/runs/{run}")).await["transitions_inserted"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_created_paused_assigned_and_deleted_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let runs = m.get_json("/api/v1/runs").await;
    assert_eq!(
        (runs["runs"][0]["name"].as_str(), runs["runs"][0]["source"].as_str(), runs["runs"][0]["prefix"].as_str()),
        (Some("default"), Some("config"), Some("/api/v1"))
    );

    // Create: only the token may, a bad entry is 422 and changes nothing.
    let fight = json!({ "name": "fight", "game": { "action_set": "fight", "task": "fight" }, "dqn": { "lr": 0.001 } });
    let r = m.http.post(m.at("/api/v1/runs")).json(&fight).send().await.unwrap();
    assert_eq!(r.status(), 401);
    for (bad, says) in [
        (json!({ "name": "Fight!" }), "a-z"),
        (json!({ "name": "x", "trainer": { "threads": 2 } }), "device"),
        (json!({ "name": "x", "dqn": { "lrr": 1.0 } }), "lrr"),
        (json!({ "name": "x", "game": { "action_set": "dance" } }), "dance"),
        // What the entry says is the run's to get right (docs/api.md: 422 invalid_run),
        // not a JSON problem: an unknown key, a [server] section, a mistyped value.
        (json!({ "name": "x", "colour": "blue" }), "colour"),
        (json!({ "name": "x", "server": { "listen": "0.0.0.0:1" } }), "server"),
        (json!({ "name": "x", "weight": "heavy" }), "weight"),
        (json!({ "weight": 1.0 }), "name"),
        // Self-play needs an opponent run that exists and plays the other side.
        (json!({ "name": "x", "game": { "opponent_run": "nobody" } }), "opponent_run = \"nobody\" is not a run"),
        (json!({ "name": "x", "game": { "opponent_run": "default" } }), "plays fox as this run does"),
        (json!({ "name": "x", "game": { "side": "luigi" } }), "unknown side"),
    ] {
        let (st, e) = send(&m, reqwest::Method::POST, "/api/v1/runs", Some(bad.clone())).await;
        assert_eq!((st, e["error"]["code"].as_str()), (422, Some("invalid_run")), "{bad}: {e}");
        assert!(e["error"]["message"].as_str().unwrap().contains(says), "{bad}: {e}");
    }
    let r = m.http.post(m.at("/api/v1/runs")).bearer_auth(TOKEN).header("content-type", "application/json").body("{\"name\": ").send().await.unwrap();
    assert_eq!(r.status(), 400, "JSON that does not parse");
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "bad_json");
    assert_eq!(m.get_json("/api/v1/runs").await["runs"].as_array().unwrap().len(), 1, "nothing was created");
    let (st, run) = send(&m, reqwest::Method::POST, "/api/v1/runs", Some(fight.clone())).await;
    assert_eq!(st, 201, "{run}");
    assert_eq!((run["source"].as_str(), run["prefix"].as_str()), (Some("api"), Some("/api/v1/runs/fight")));
    let s = &run["settings"];
    assert_eq!((s["dqn"]["lr"].as_f64(), s["game"]["action_set"].as_str()), (Some(0.001), Some("fight")));
    assert_eq!((s["replay"]["capacity"].as_u64(), s["trainer"]["burn_in"].as_u64()), (Some(10_000), Some(100)), "the rest is the manager's");
    let (st, e) = send(&m, reqwest::Method::POST, "/api/v1/runs", Some(fight)).await;
    assert_eq!((st, e["error"]["code"].as_str()), (409, Some("run_exists")));

    // Uploads go to the run in the path and nowhere else.
    assert_eq!(upload_to(&m, "fight", batch(200, 1)).await.0, 202);
    until("fight's rows in its replay", async || inserted(&m, "fight").await == 200).await;
    assert_eq!(inserted(&m, "default").await, 0);
    assert_eq!(upload_to(&m, "nosuch", batch(10, 2)).await.0, 404);
    let stats = m.get_json("/api/v1/runs/fight/stats").await;
    assert_eq!((stats["run"].as_str(), stats["action_set"].as_str()), (Some("fight"), Some("fight")));
    let r = m.http.get(m.at("/api/v1/runs/fight/models/latest")).send().await.unwrap();
    let version = r.headers()["x-shine-model-version"].to_str().unwrap().to_string();
    assert_eq!(r.headers()["content-disposition"].to_str().unwrap(), format!("attachment; filename=\"shine-fight-fight-v{version}.safetensors\""));
    let net = shine_agent::model::QNet::load(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(net.meta().action_set, "fight", "each run publishes models of its own action set");

    // Pause: no uploads (503 run_paused, nothing kept), no training; resume: both again.
    until("fight to train", async || m.get_json("/api/v1/runs/fight").await["train_steps"].as_u64().unwrap() > 0).await;
    let (st, run) = send(&m, reqwest::Method::POST, "/api/v1/runs/fight/pause", None).await;
    assert_eq!((st, run["paused"].as_bool()), (200, Some(true)));
    let (st, e) = upload_to(&m, "fight", batch(100, 3)).await;
    assert_eq!((st, e["error"]["code"].as_str()), (503, Some("run_paused")), "{e}");
    // The checks' order (docs/api.md): the content type before the pause.
    let r = m.http.post(m.at("/api/v1/runs/fight/experience")).bearer_auth(TOKEN).header("content-type", "text/plain").body(batch(100, 3)).send().await.unwrap();
    assert_eq!(r.status(), 415, "a wrong content type is answered before the pause");
    assert!(e["error"]["message"].as_str().unwrap().contains("/api/v1/runs/fight/resume"));
    let steps = m.get_json("/api/v1/runs/fight").await["train_steps"].as_u64().unwrap();
    // A while for a step of the paused run to show (weaker on a slow machine, never wrong).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(m.get_json("/api/v1/runs/fight").await["train_steps"].as_u64().unwrap(), steps, "a paused run takes no step");
    assert_eq!(inserted(&m, "fight").await, 200);
    assert_eq!(upload_to(&m, "default", batch(100, 4)).await.0, 202, "the other run takes uploads");
    let (st, _) = send(&m, reqwest::Method::POST, "/api/v1/runs/fight/resume", None).await;
    assert_eq!(st, 200);
    assert_eq!(upload_to(&m, "fight", batch(100, 3)).await.0, 202);
    until("fight's next rows", async || inserted(&m, "fight").await == 300).await;
    assert!(m.metrics().await.contains("shine_uploads_rejected_total{reason=\"run_paused\",run=\"fight\"} 1"));

    // Assignment: the fewest workers per weight, then the fewest transitions inserted.
    let (_, a) = m.post_json("/api/v1/workers", &json!({ "host": "a" })).await;
    assert_eq!(a["run"], "default", "no workers anywhere: default has inserted less (100 < 300)");
    let (_, b) = m.post_json("/api/v1/workers", &json!({ "host": "b" })).await;
    assert_eq!((b["run"].as_str(), b["action_set"].as_str()), (Some("fight"), Some("fight")), "default has a worker now");
    let (_, c) = m.post_json("/api/v1/runs/fight/workers", &json!({ "host": "c" })).await;
    assert_eq!(c["run"], "fight", "a named run is joined as asked");
    let fight_workers = m.get_json("/api/v1/runs/fight/workers").await;
    assert_eq!(fight_workers["workers"].as_array().unwrap().len(), 2);
    assert_eq!(fight_workers["workers"][1]["slot"], 1, "each run has its own ladder: c is fight's second");

    // Delete: confirmation, never a declared run, the data kept aside, then 404.
    let (st, e) = send(&m, reqwest::Method::DELETE, "/api/v1/runs/fight", None).await;
    assert_eq!((st, e["error"]["code"].as_str()), (400, Some("confirm_required")));
    let (st, e) = send(&m, reqwest::Method::DELETE, "/api/v1/runs/default?confirm=default", None).await;
    assert_eq!((st, e["error"]["code"].as_str()), (409, Some("declared_in_config")));
    let (st, d) = send(&m, reqwest::Method::DELETE, "/api/v1/runs/fight?confirm=fight", None).await;
    assert_eq!(st, 200, "{d}");
    let kept = std::path::PathBuf::from(d["kept_at"].as_str().unwrap());
    assert!(kept.join("checkpoint/checkpoint.safetensors").exists(), "the final checkpoint, moved aside: {kept:?}");
    assert!(!dir.path().join("runs/fight").exists());
    assert_eq!(m.http.get(m.at("/api/v1/runs/fight/stats")).send().await.unwrap().status(), 404);
    assert_eq!(upload_to(&m, "fight", batch(10, 5)).await.0, 404);
    assert!(!m.metrics().await.contains("run=\"fight\""), "its series are gone");
    until("the history to mark it deleted", async || {
        m.get_json("/api/v1/history").await["runs"].as_array().unwrap().iter().any(|r| r["name"] == "fight" && !r["deleted_unix"].is_null())
    })
    .await;
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_created_through_the_api_and_its_pause_outlive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let (st, _) = send(&m, reqwest::Method::POST, "/api/v1/runs", Some(json!({ "name": "lr-1e-3", "weight": 2.0, "dqn": { "lr": 0.001 } }))).await;
    assert_eq!(st, 201);
    assert_eq!(send(&m, reqwest::Method::POST, "/api/v1/runs/lr-1e-3/pause", None).await.0, 200);
    assert_eq!(upload_to(&m, "default", batch(100, 1)).await.0, 202);
    m.stop().await.unwrap();

    let m = Manager::start(config(dir.path())).await;
    let runs = m.get_json("/api/v1/runs").await;
    let names: Vec<&str> = runs["runs"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "lr-1e-3"]);
    let r = &runs["runs"][1];
    assert_eq!(
        (r["source"].as_str(), r["paused"].as_bool(), r["settings"]["weight"].as_f64(), r["settings"]["dqn"]["lr"].as_f64()),
        (Some("api"), Some(true), Some(2.0), Some(0.001))
    );
    assert_eq!(inserted(&m, "default").await, 100, "default's log came back");
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_from_before_runs_is_the_default_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    // Trained until the rate limiter's budget for 150 rows is spent: then the version
    // read holds until the stop.
    let steps = (cfg.trainer.samples_per_insert as u64 * 150 + cfg.trainer.rate_slack) / cfg.dqn.batch_size as u64;
    let m = Manager::start(cfg).await;
    assert_eq!(m.upload(batch(150, 1)).await.0, 202);
    m.wait_for("the limiter's budget trained", |c| c["train_steps"] == steps).await;
    let version = m.current().await["model_version"].as_u64().unwrap();
    m.stop().await.unwrap();
    // Put the data back where a manager from before runs kept it.
    for name in ["checkpoint", "models", "wal"] {
        std::fs::rename(dir.path().join("runs/default").join(name), dir.path().join(name)).unwrap();
    }
    let m = Manager::start(config(dir.path())).await;
    let c = m.current().await;
    assert_eq!((c["replay_size"].as_u64(), c["model_version"].as_u64()), (Some(150), Some(version)), "moved into runs/default and read there");
    assert!(!dir.path().join("wal").exists() && dir.path().join("runs/default/wal").exists());
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_the_token_learns_no_run_names_when_reads_are_private() {
    // Regression: the run-exists check ran before authentication, so with
    // public_reads = false a 404 for an unknown run listed every run to anyone.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.public_reads = false;
    cfg.runs = vec![shine_manager::config::RunSpec { name: "secret-sweep".into(), ..shine_manager::config::RunSpec::empty() }];
    let m = Manager::start(cfg).await;
    let client = &m.http;
    let stranger = [
        client.get(m.at("/api/v1/runs/nosuch/stats")),
        client.get(m.at("/api/v1/runs/nosuch/models")),
        client.get(m.at("/api/v1/runs/nosuch")),
        client.post(m.at("/api/v1/runs/nosuch/experience")).header("content-type", "application/octet-stream").body(batch(10, 1)),
        client.post(m.at("/api/v1/runs/nosuch/pause")),
        client.post(m.at("/api/v1/runs/nosuch/workers")).json(&json!({ "host": "h" })),
        client.delete(m.at("/api/v1/runs/nosuch?confirm=nosuch")),
        // The routes without a run address "default", which this manager does not have.
        client.get(m.at("/api/v1/stats")),
        client.post(m.at("/api/v1/experience")).header("content-type", "application/octet-stream").body(batch(10, 2)),
    ];
    for rq in stranger {
        let r = rq.send().await.unwrap();
        let (url, status) = (r.url().to_string(), r.status().as_u16());
        let body = r.text().await.unwrap();
        assert_eq!(status, 401, "{url}: {body}");
        assert!(!body.contains("secret-sweep"), "{url} names a run to a stranger: {body}");
    }
    // The same for a run that exists: nothing tells the two apart.
    let r = client.get(m.at("/api/v1/runs/secret-sweep/stats")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    // With the token, a 404 helps: it names the runs there are.
    let r = client.get(m.at("/api/v1/runs/nosuch/stats")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("secret-sweep"), "the runs are named to a reader");
    let r = client.get(m.at("/api/v1/runs/nosuch/stats?token=test-token")).send().await.unwrap();
    assert_eq!(r.status(), 404, "?token= makes a reader too");
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_without_the_token_is_401_whether_or_not_its_run_exists() {
    // Regression (issue 42): with public reads on, a write under /runs/{run} for a run
    // that does not exist, sent without the token, answered 404 naming the runs, where
    // docs/api.md checks the token first.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.public_reads = true;
    let m = Manager::start(cfg).await;
    let c = &m.http;
    let writes = |token: bool| {
        let auth = |rq: reqwest::RequestBuilder| if token { rq.bearer_auth(TOKEN) } else { rq };
        [
            auth(c.post(m.at("/api/v1/runs/nosuch/experience")).header("content-type", "application/octet-stream").body(batch(10, 1))),
            auth(c.post(m.at("/api/v1/runs/nosuch/workers")).json(&json!({ "host": "h" }))),
            auth(c.post(m.at("/api/v1/runs/nosuch/workers/1/heartbeat")).json(&json!({}))),
            auth(c.post(m.at("/api/v1/runs/nosuch/pause"))),
        ]
    };
    // Without the token: 401, naming no run; with it, the 404 names the runs there are.
    for (token, want, names) in [(false, 401, false), (true, 404, true)] {
        for rq in writes(token) {
            let r = rq.send().await.unwrap();
            let (url, status) = (r.url().to_string(), r.status().as_u16());
            let body = r.text().await.unwrap();
            assert_eq!(status, want, "{url}: {body}");
            assert_eq!(body.contains("default"), names, "{url}: {body}");
        }
    }
    // A read needs no token here.
    let r = c.get(m.at("/api/v1/runs/nosuch/stats")).send().await.unwrap();
    assert_eq!(r.status(), 404, "public reads: a reader is told");
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_created_a_moment_ago_has_a_history() {
    // Regression (issue 42): GET /history/{run} answered 404 for a run just created
    // (and already fed), until the history's writer had stored the run, about a
    // second later.
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let (st, run) = m.post_json("/api/v1/runs", &json!({ "name": "fresh" })).await;
    assert_eq!(st, 201, "{run}");
    assert_eq!(upload_to(&m, "fresh", batch(20, 3)).await.0, 202);
    let r = m.http.get(m.at("/api/v1/history/fresh")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let h: Value = r.json().await.unwrap();
    assert_eq!(h["run"], "fresh");
    assert!(h["series"].is_array() && h["evals"].is_array(), "{h}");
    // A run neither the manager nor its history knows is still a 404.
    let r = m.http.get(m.at("/api/v1/history/never")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    m.stop().await.unwrap();
}
