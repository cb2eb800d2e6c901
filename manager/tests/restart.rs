//! Two manager runs on one data directory: the second continues the step counter,
//! rebuilds the replay from the write-ahead log, and serves the same model, byte for
//! byte, under the same version and ETag.

mod common;

use common::*;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_a_checkpoint_continues_the_step_counter_and_serves_the_same_model() {
    let dir = tempfile::tempdir().unwrap();

    // Run 1: train past burn-in until several models are published, and on until the
    // rate limiter stops it: the learner may sample at most samples_per_insert per
    // inserted transition plus rate_slack, one batch at a time. Waiting for that exact
    // count (not for the counter to look still, which a slow fsync can fake) makes
    // the checkpoint written at stop hold a known step count.
    let cfg = config(dir.path());
    let inserted = 8 * 100;
    let steps = (cfg.trainer.samples_per_insert as u64 * inserted + cfg.trainer.rate_slack) / cfg.dqn.batch_size as u64;
    let m = Manager::start(cfg).await;
    for seed in 0..8 {
        assert_eq!(m.upload(batch(100, seed)).await.0, 202);
    }
    m.wait_for("training and a few published models", 120, |c| c["model_version"].as_u64().unwrap() >= 3).await;
    m.wait_for("the rate limiter's budget trained", 120, |c| c["train_steps"] == steps).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(m.current().await["train_steps"], steps, "the limiter holds training there");
    assert!(steps > 0);
    let r = m.http.get(m.at("/api/v1/models/latest")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    let version: u64 = r.headers()["x-shine-model-version"].to_str().unwrap().parse().unwrap();
    let model = r.bytes().await.unwrap();
    let listed = m.get_json("/api/v1/models").await;
    assert_eq!(listed["latest"], version);
    m.stop().await.unwrap();

    // Run 2, same data dir. The replay comes back from the log (all 800 rows), so
    // the learner may train again at once, within the rate limiter's slack (restored
    // rows are not new inserts): the step counter continues from `steps`.
    let cfg = config(dir.path());
    let most = steps + cfg.trainer.rate_slack / cfg.dqn.batch_size as u64;
    let m = Manager::start(cfg).await;
    let c = m.current().await;
    let continued = |c: &serde_json::Value| (steps..=most).contains(&c["train_steps"].as_u64().unwrap());
    assert!(continued(&c), "the step counter continues from {steps}: {c}");
    assert_eq!(c["replay_size"].as_u64().unwrap() + c["replay_staged"].as_u64().unwrap(), inserted, "the replay is rebuilt: {c}");
    assert_eq!(c["model_version"], version);
    let r = m.http.get(m.at("/api/v1/models/latest")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["etag"].to_str().unwrap(), etag);
    assert!(r.bytes().await.unwrap() == model, "the same model file is served");
    // A worker holding that model is told nothing changed.
    let r = m.http.get(m.at("/api/v1/models/latest")).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(r.status(), 304);
    assert_eq!(m.get_json("/api/v1/models").await["latest"], version);
    let text = m.metrics().await;
    let counted = metric(&text, "shine_train_steps_total{run=\"default\"}").unwrap() as u64;
    assert!((steps..=most).contains(&counted), "the Prometheus counter resumes too: {counted}");

    // And training goes on from there: new steps, a newer model.
    for seed in 100..108 {
        assert_eq!(m.upload(batch(100, seed)).await.0, 202);
    }
    let c = m.wait_for("training after the restart", 120, |c| c["model_version"].as_u64().unwrap() > version).await;
    assert!(c["train_steps"].as_u64().unwrap() > steps);
    m.stop().await.unwrap();
}
