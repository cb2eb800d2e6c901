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
    m.wait_for("training and a few published models", |c| c["model_version"].as_u64().unwrap() >= 3).await;
    m.wait_for("the rate limiter's budget trained", |c| c["train_steps"] == steps).await;
    // A while for a step beyond the budget to show (the sleep only gives it time: on a
    // slow machine the check is weaker, never wrong).
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
    let c = m.wait_for("training after the restart", |c| c["model_version"].as_u64().unwrap() > version).await;
    assert!(c["train_steps"].as_u64().unwrap() > steps);
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_curves_and_episode_windows_go_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let (st, _) = m.post_json("/api/v1/workers", &serde_json::json!({ "host": "h" })).await;
    assert_eq!(st, 201);
    let episode =
        |reward: f64, eval: bool| serde_json::json!({ "frames": 3600, "reward": reward, "survived": eval, "eval": eval, "cpu_level": 9, "model_version": 1 });
    let (st, _) = m
        .post_json("/api/v1/episodes", &serde_json::json!({ "worker_id": 1, "episodes": [episode(2.0, false), episode(4.0, false), episode(0.0, true)] }))
        .await;
    assert_eq!(st, 200);
    // A few samples (one every 0.1 s), with the episodes in them: waited for by count,
    // however long this machine takes to make them.
    m.wait_for("the episodes in a sample", |c| c["episode_reward"] == 3.0).await;
    until("three samples in the series", async || m.get_json("/api/v1/stats").await["series"].as_array().unwrap().len() >= 3).await;
    let before = m.get_json("/api/v1/stats").await["series"].as_array().unwrap().clone();
    assert!(before.len() >= 3, "{before:?}");
    m.stop().await.unwrap();

    let m = Manager::start(config(dir.path())).await;
    let stats = m.get_json("/api/v1/stats").await;
    let after = stats["series"].as_array().unwrap();
    let times = |v: &[serde_json::Value]| v.iter().map(|s| s["t"].as_f64().unwrap()).collect::<Vec<_>>();
    assert_eq!(times(&after[..before.len()]), times(&before), "the series before the restart comes back first, sample by sample");
    assert_eq!((stats["current"]["episode_reward"].as_f64(), stats["current"]["eval_survival"].as_f64()), (Some(3.0), Some(1.0)), "the episode windows too");
    assert_eq!(stats["episodes_total"], 0, "totals count this process's episodes");

    // The history API: the run, its series thinned on request, its evaluations.
    let runs = m.get_json("/api/v1/history").await;
    assert_eq!(runs["runs"][0]["name"], "default");
    assert!(runs["runs"][0]["samples"].as_u64().unwrap() >= before.len() as u64);
    let h = m.get_json("/api/v1/history/default?max_points=2").await;
    assert!(!h["series"].as_array().unwrap().is_empty() && h["series"].as_array().unwrap().len() <= 2, "{h}");
    assert_eq!(h["evals"], serde_json::json!([{ "version": 1, "episodes": 1, "survived": 1 }]));
    let r = m.http.get(m.at("/api/v1/history/nosuch")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = m.http.get(m.at("/api/v1/history/default?max_points=0")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_paused_before_a_graceful_stop_keeps_its_steps_across_the_restart() {
    // Regression: the final checkpoint of a paused run was not written at a graceful
    // stop, so it came back with the steps of its last periodic checkpoint.
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    for seed in 0..4 {
        assert_eq!(m.upload(batch(100, seed)).await.0, 202);
    }
    m.wait_for("some training", |c| c["train_steps"].as_u64().unwrap() >= 50).await;
    let (st, run) = m.post_json("/api/v1/runs/default/pause", &serde_json::json!({})).await;
    assert_eq!(st, 200, "{run}");
    // The pause's answer shows the run once no step can follow: its exact count.
    let steps = run["train_steps"].as_u64().unwrap();
    // A while for a step after the pause to show (weaker on a slow machine, never wrong).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(m.get_json("/api/v1/runs/default").await["train_steps"].as_u64().unwrap(), steps, "the count holds");
    m.stop().await.unwrap();

    let m = Manager::start(config(dir.path())).await;
    let after = m.get_json("/api/v1/runs/default").await;
    assert_eq!(after["train_steps"].as_u64().unwrap(), steps, "the paused run's steps survive the restart: {after}");
    assert_eq!(after["paused"], true, "and it is still paused");
    m.stop().await.unwrap();
}
