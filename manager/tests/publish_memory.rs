//! The manager's memory stays flat over many published models while a browser watches a
//! live match (the Parallel Joint PPO lesson: memory that grows across model syncs):
//! the publish path, the registry, the live fan-out, the stats history and the episode
//! log are all bounded. Resident memory is read from /proc/self/status (the manager
//! runs in this test's process), so this file holds a single test.

mod common;

use common::{batch, config, connect, frames, next_json, register, until, Manager};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux)");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_flat_over_100_publishes_with_a_live_browser_attached() {
    const PUBLISHES: u64 = 100;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.trainer.publish_every = 5;
    // Small bounds, so everything bounded is full before the first measurement.
    c.replay.capacity = 4000;
    c.stats.history = 40;
    c.stats.recent_episodes = 40;
    let m = Arc::new(Manager::start(c).await);
    let id = register(&m).await;
    let stop = Arc::new(AtomicBool::new(false));

    // A browser on the live view, reading everything, for the whole test...
    let mut ws = connect(&m, &format!("/api/v1/live/{id}")).await.unwrap();
    assert_eq!(next_json(&mut ws).await["type"], "hello");
    let received = Arc::new(AtomicU64::new(0));
    let browser = {
        let (received, stop) = (received.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Relaxed) {
                if next_json(&mut ws).await["type"] == "frames" {
                    received.fetch_add(1, Relaxed);
                }
            }
        })
    };
    // ...the worker's stream to it, its experience and its episodes, as a worker sends them.
    let feeder = {
        let (m, stop) = (m.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Relaxed) {
                m.post_json(&format!("/api/v1/workers/{id}/live"), &frames(n * 6, 6)).await;
                let _ = m.upload(batch(100, n)).await; // a 503 (busy) is fine: the next one goes
                let ep =
                    json!({ "frames": 600, "reward": 1.0, "survived": n.is_multiple_of(2), "eval": n.is_multiple_of(5), "cpu_level": 9, "model_version": 1 });
                m.post_json("/api/v1/episodes", &json!({ "worker_id": id, "episodes": [ep] })).await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };

    // Warm up: the replay full, the stats history and the episode log full, 10 models.
    let warm = m.wait_for("a full replay and 10 models", |c| c["replay_size"] == 4000 && c["model_version"].as_u64().unwrap() >= 10).await;
    // The 40-point history (a sample every 0.1 s) and the 40-episode log full too:
    // counted, however long this machine takes to fill them.
    until("a full stats history and episode log", async || {
        let s = m.get_json("/api/v1/stats").await;
        s["series"].as_array().unwrap().len() >= 40 && s["episodes_total"].as_u64().unwrap() >= 40
    })
    .await;
    let v0 = m.current().await["model_version"].as_u64().unwrap();
    let before = rss_kib();
    m.wait_for("100 more models", |c| c["model_version"].as_u64().unwrap() >= v0 + PUBLISHES).await;
    let after = rss_kib();
    let models = m.get_json("/api/v1/models").await;
    // The browser keeps receiving frames: a count reached, not a number in a fixed time.
    until("the browser to receive more than 100 batches of frames", async || received.load(Relaxed) > 100).await;
    stop.store(true, Relaxed);
    feeder.await.unwrap();
    browser.abort();

    let growth = after as i64 - before as i64;
    eprintln!("RSS {before} KiB at model v{v0}, {after} KiB {PUBLISHES} publishes later (growth {growth} KiB); warm-up at v{}", warm["model_version"]);
    assert!(received.load(Relaxed) > 100, "the browser kept receiving frames: {}", received.load(Relaxed));
    assert!((growth.abs() as f64) < 0.05 * before as f64, "RSS grew {growth} KiB over {PUBLISHES} publishes");
    // The registry kept what it keeps (the newest 5, the best 3), not every model.
    let kept = models["models"].as_array().unwrap().len();
    assert!(kept <= 8, "{kept} models kept");
}
