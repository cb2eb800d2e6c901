//! The dashboard's server side against a real manager: the page and its access rules,
//! the live-match fan-out (a worker's long poll, its frame posts, browsers on real
//! WebSockets), and the figures the charts and the workers table need.

mod common;

use common::{batch, config, connect, frames, next_json, register, Manager, HANG, TOKEN};
use futures_util::SinkExt;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_frames_reach_every_browser_and_watching_is_signalled_to_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let id = register(&m).await;
    let hb = |m: &Manager| {
        let (http, url) = (m.http.clone(), m.at(&format!("/api/v1/workers/{id}/heartbeat")));
        async move { http.post(url).bearer_auth(TOKEN).json(&json!({})).send().await.unwrap().json::<Value>().await.unwrap() }
    };
    assert_eq!(hb(&m).await["watch"], false, "nobody watches yet");

    // The worker's long poll, held open while no browser watches (30 s: the longest the
    // manager holds one)...
    let poll = {
        let (http, url) = (m.http.clone(), m.at(&format!("/api/v1/workers/{id}/live?wait_secs=30")));
        tokio::spawn(async move {
            let t0 = Instant::now();
            let r: Value = http.get(url).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
            (r, t0.elapsed())
        })
    };
    // (The sleep only gives an early answer time to show: weaker on a slow machine, never wrong.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!poll.is_finished(), "the long poll waits while nobody watches");
    // ...returns as soon as a browser opens the live WebSocket.
    let mut a = connect(&m, &format!("/api/v1/live/{id}")).await.unwrap();
    assert_eq!(next_json(&mut a).await["type"], "hello");
    let (reply, waited) = poll.await.unwrap();
    // A poll that ran into its timeout answers false: true is the browser's doing.
    assert_eq!(reply["watch"], true);
    // And at once: the bound is two thirds of the poll's 30 s timeout, not a guess at this
    // machine's speed (a wake-up takes milliseconds; a loaded machine has 20 s of room).
    assert!(waited < Duration::from_secs(20), "woke at once, not after the 30 s wait: {waited:?}");
    assert_eq!(hb(&m).await["watch"], true, "the heartbeat reply says so too");

    // Frames posted by the worker reach every browser, unchanged.
    let mut b = connect(&m, &format!("/api/v1/live/{id}")).await.unwrap();
    next_json(&mut b).await;
    let (st, r) = m.post_json(&format!("/api/v1/workers/{id}/live"), &frames(100, 6)).await;
    assert_eq!((st, &r["watch"], &r["watchers"]), (200, &json!(true), &json!(2)));
    for ws in [&mut a, &mut b] {
        let msg = next_json(ws).await;
        assert_eq!(msg["type"], "frames");
        assert_eq!(msg["worker_id"], id);
        let got = &msg["batch"]["frames"];
        assert_eq!(got.as_array().unwrap().len(), 6);
        assert_eq!(got[5]["frame"], 105);
        assert_eq!(got[5]["agent"]["x"], 105.0);
        assert_eq!(got[0]["agent"]["action_name"], "Wait");
        assert_eq!(msg["batch"]["actions"][1], "shine");
    }

    // A browser that reads nothing must not hold the worker up: far more posts than the
    // backlog are all answered (a post held up by a browser that never reads would wait
    // for ever: the limit is only for that hang), and the reading browser still gets the
    // newest batch.
    let posts = async {
        for i in 0..300u32 {
            let (st, _) = m.post_json(&format!("/api/v1/workers/{id}/live"), &frames(1000 + i * 6, 6)).await;
            assert_eq!(st, 200);
        }
    };
    tokio::time::timeout(HANG, posts).await.expect("posts were held up by the browser that reads nothing");
    let mut last = 0;
    while last != 1000 + 299 * 6 + 5 {
        let msg = next_json(&mut a).await;
        last = msg["batch"]["frames"][5]["frame"].as_u64().unwrap();
    }

    // Bad batches change nothing; writes need the token.
    let mut bad = frames(0, 1);
    bad["frames"][0]["q"] = json!(vec![0.0; 65]);
    let (st, err) = m.post_json(&format!("/api/v1/workers/{id}/live"), &bad).await;
    assert_eq!((st, err["error"]["code"].as_str()), (422, Some("bad_live_batch")));
    let st = m.http.post(m.at(&format!("/api/v1/workers/{id}/live"))).json(&frames(0, 1)).send().await.unwrap().status();
    assert_eq!(st, 401);
    let (st, _) = m.post_json("/api/v1/workers/9999/live", &frames(0, 1)).await;
    assert_eq!(st, 404, "frames for an unknown worker");
    let refused = connect(&m, "/api/v1/live/9999").await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("404"), "watching an unknown worker: {refused}");

    // When the browsers leave, the worker's next post is told to stop.
    a.close(None).await.unwrap();
    drop(b);
    let deadline = Instant::now() + HANG;
    loop {
        let (_, r) = m.post_json(&format!("/api/v1/workers/{id}/live"), &frames(0, 1)).await;
        if r["watch"] == false {
            assert_eq!(r["watchers"], 0);
            break;
        }
        assert!(Instant::now() < deadline, "the manager never noticed the browsers leave");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(hb(&m).await["watch"], false);
    let r: Value = m.http.get(m.at(&format!("/api/v1/workers/{id}/live?wait_secs=0.2"))).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    assert_eq!(r["watch"], false, "a short poll with nobody watching");
    m.stop().await.unwrap();
}

#[tokio::test]
async fn the_page_and_reads_follow_public_reads_and_writes_always_need_the_token() {
    // Public (the default): the page and its assets need nothing.
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let r = m.http.get(m.at("/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = r.text().await.unwrap();
    assert!(html.contains("<canvas id=\"stage\"") && html.contains("app.js"), "the dashboard page");
    let js = m.http.get(m.at("/app.js")).send().await.unwrap();
    assert!(js.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    assert!(js.text().await.unwrap().contains("from \"./live.js\""), "the entry module imports the live view");
    // The modules are served too: the one that builds the live WebSocket's address.
    let api = m.http.get(m.at("/api.js")).send().await.unwrap();
    assert!(api.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    assert!(api.text().await.unwrap().contains("\"/live/\""), "the module that builds the live WebSocket's address");
    let id = register(&m).await;
    let mut ws = connect(&m, &format!("/api/v1/live/{id}")).await.expect("public live view");
    assert_eq!(next_json(&mut ws).await["type"], "hello");
    m.stop().await.unwrap();

    // Private: everything that shows data needs the token, as a header or ?token=.
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.public_reads = false;
    let m = Manager::start(c).await;
    let id = register(&m).await;
    let status = |path: &str| {
        let (http, url) = (m.http.clone(), m.at(path));
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("/").await, 401);
    let page = m.http.get(m.at("/")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Token needed") && page.contains("/?token=YOUR_TOKEN"), "a person is told what to do: {page}");
    assert_eq!(status(&format!("/?token={TOKEN}")).await, 200);
    assert_eq!(status("/?token=wrong").await, 401);
    assert_eq!(status("/api/v1/stats").await, 401);
    assert_eq!(status(&format!("/api/v1/stats?token={TOKEN}")).await, 200);
    assert_eq!(status(&format!("/api/v1/models/latest?token={TOKEN}")).await, 200, "download links carry the token");
    assert_eq!(status("/app.js").await, 200, "the script holds no data");
    let err = connect(&m, &format!("/api/v1/live/{id}")).await.unwrap_err().to_string();
    assert!(err.contains("401"), "{err}");
    let mut ws = connect(&m, &format!("/api/v1/live/{id}?token={TOKEN}")).await.expect("live view with the token");
    assert_eq!(next_json(&mut ws).await["type"], "hello");
    // A write never takes the query token.
    let st = m.http.post(m.at(&format!("/api/v1/workers/{id}/heartbeat?token={TOKEN}"))).json(&json!({})).send().await.unwrap().status();
    assert_eq!(st, 401);
    ws.send(Message::Close(None)).await.unwrap();
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_carry_the_age_of_incoming_data_and_workers_their_last_upload() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let id = register(&m).await;
    let worker = |stats: &Value| stats["workers"].as_array().unwrap().iter().find(|w| w["worker_id"] == id).cloned().unwrap();
    let s = m.get_json("/api/v1/stats").await;
    assert_eq!(worker(&s)["state"], "live");
    assert_eq!(worker(&s)["last_upload_secs"], Value::Null, "no upload yet");

    // Played by model 1 while model 1 is the latest: age 0.
    let mut seed = 0;
    let mut upload = |m: &Manager| {
        seed += 1;
        let body = batch(60, seed);
        let (http, url) = (m.http.clone(), m.at("/api/v1/experience"));
        async move { http.post(url).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(body).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(upload(&m).await, 202);
    let has_age = |want: &dyn Fn(f64) -> bool, s: &Value| s["series"].as_array().unwrap().iter().any(|p| p["data_age"].as_f64().is_some_and(want));
    let deadline = Instant::now() + HANG;
    while !has_age(&|a| a == 0.0, &m.get_json("/api/v1/stats").await) {
        assert!(Instant::now() < deadline, "no sample with data_age 0");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The upload counts for the worker whose id the batch header names (1 here).
    let s = m.get_json("/api/v1/stats").await;
    assert!(worker(&s)["last_upload_secs"].as_f64().is_some(), "{s}");

    // Train until a newer model is out; data still played by model 1 is now behind.
    for _ in 0..4 {
        assert_eq!(upload(&m).await, 202);
    }
    m.wait_for("model 3", |c| c["model_version"].as_u64().unwrap() >= 3).await;
    let deadline = Instant::now() + HANG;
    loop {
        assert!(matches!(upload(&m).await, 202 | 503));
        tokio::time::sleep(Duration::from_millis(150)).await;
        if has_age(&|a| a >= 2.0, &m.get_json("/api/v1/stats").await) {
            break;
        }
        assert!(Instant::now() < deadline, "data_age never showed model-1 data as behind");
    }
    m.stop().await.unwrap();
}
