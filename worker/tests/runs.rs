//! Several runs on one manager, with real processes: two runs of different tasks and
//! action sets (`testkit/configs/worker-runs.toml`), workers that join one by name and one the manager assigns, a pause
//! and a restart.

mod procs;

use procs::*;
use serde_json::Value;

fn runs(port: u16) -> Vec<Value> {
    get_json(port, "/api/v1/runs").and_then(|v| v["runs"].as_array().cloned()).unwrap_or_default()
}

fn run_field(port: u16, run: &str, field: &str) -> u64 {
    runs(port).iter().find(|r| r["name"] == run).and_then(|r| r[field].as_u64()).unwrap_or(0)
}

/// The run each worker is listed in, by host-independent worker id.
fn workers_of(port: u16, run: &str) -> Vec<u64> {
    let list = get_json(port, &format!("/api/v1/runs/{run}/workers")).unwrap_or_default();
    list["workers"].as_array().map(|ws| ws.iter().filter(|w| w["state"] != "gone").filter_map(|w| w["worker_id"].as_u64()).collect()).unwrap_or_default()
}

#[test]
fn two_runs_train_side_by_side_with_their_own_workers_models_and_pause() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-runs.toml");
    let port = m.port;
    let mut manager = m.start();
    let names: Vec<String> = runs(port).iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["dodge", "fight"]);
    assert_eq!(status(&http_get(port, "/api/v1/stats").unwrap()), 404, "no run named default: the routes without a run are 404");

    let wdir = |n: &str| {
        let d = dir.path().join(n);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (d1, d2, d3) = (wdir("w-dodge"), wdir("w-fight"), wdir("w-assigned"));
    let w1 = start_worker(&d1, port, &["--run", "dodge"]);
    let mut w2 = start_worker(&d2, port, &["--run", "fight"]);
    wait_for(HANG, "both named workers to register", || workers_of(port, "dodge").len() == 1 && workers_of(port, "fight").len() == 1, &w1);
    // dodge has weight 2: one worker there is half a worker per unit of weight, so the
    // next worker without --run goes to dodge.
    let w3 = start_worker(&d3, port, &[]);
    wait_for(HANG, "the third worker to be assigned", || workers_of(port, "dodge").len() == 2, &manager);
    assert_eq!(workers_of(port, "fight").len(), 1);

    // Both runs train and publish models of their own action set.
    wait_for(
        HANG,
        "both runs to train and publish",
        || {
            ["dodge", "fight"].iter().all(|r| {
                run_metric(port, "shine_train_steps_total", r).unwrap_or(0.0) > 0.0 && run_metric(port, "shine_model_version", r).unwrap_or(0.0) >= 3.0
            })
        },
        &manager,
    );
    for (run, actions) in [("dodge", "untouchable"), ("fight", "fight")] {
        let r = http_get(port, &format!("/api/v1/runs/{run}/models/latest")).unwrap();
        assert_eq!(status(&r), 200);
        let stats = get_json(port, &format!("/api/v1/runs/{run}/stats")).unwrap();
        assert_eq!((stats["run"].as_str(), stats["action_set"].as_str()), (Some(run), Some(actions)));
        let list = get_json(port, &format!("/api/v1/runs/{run}/models")).unwrap();
        let url = list["models"][0]["url"].as_str().unwrap().to_string();
        assert!(url.starts_with(&format!("/api/v1/runs/{run}/models/")), "{url}");
    }
    // Every worker swaps to newer models of its own run (a model of the other action
    // set would be refused: "registered to play").
    for (w, what) in [(&w1, "dodge"), (&w2, "fight"), (&w3, "assigned")] {
        wait_for(HANG, &format!("the {what} worker to play a newer model"), || w.log().contains("playing with a new model"), w);
        assert!(!w.log().contains("registered to play"), "{what} worker was served another run's model:\n{}", w.log());
    }
    assert!(w3.log().contains("run=dodge"), "the assigned worker logs its run:\n{}", w3.log());

    // Pause fight: its training stops, its worker's uploads are answered 503
    // run_paused (the worker keeps them), dodge trains on.
    let r = http(port, "POST", "/api/v1/runs/fight/pause").unwrap();
    assert_eq!(status(&r), 200, "{r}");
    // The pause is answered once no step of fight's can follow (the manager waits for
    // a step in flight): the count read now is the one that must hold.
    let (f0, d0) = (run_field(port, "fight", "train_steps"), run_field(port, "dodge", "train_steps"));
    wait_for(
        HANG,
        "fight's uploads to be refused as paused",
        || run_metric_labels(port, "shine_uploads_rejected_total", "reason=\"run_paused\",run=\"fight\"").unwrap_or(0.0) > 0.0,
        &manager,
    );
    wait_for(HANG, "dodge to keep training", || run_field(port, "dodge", "train_steps") > d0 + 100, &manager);
    assert_eq!(run_field(port, "fight", "train_steps"), f0, "a paused run takes no train step");
    assert_eq!(run_metric_labels(port, "shine_uploads_rejected_total", "reason=\"run_paused\",run=\"dodge\""), None);

    // A restart resumes both, with fight still paused.
    manager.signal("TERM");
    assert!(manager.wait(HANG).success(), "manager log:\n{}", manager.log());
    for r in ["dodge", "fight"] {
        assert!(dir.path().join(format!("data/runs/{r}/checkpoint/checkpoint.safetensors")).exists(), "{r} wrote its final checkpoint");
    }
    let manager = m.start();
    let (fight, dodge) = (run_field(port, "fight", "train_steps"), run_field(port, "dodge", "train_steps"));
    assert!(fight >= f0 && dodge > d0, "train steps continue from the checkpoints: fight {fight} (paused at {f0}), dodge {dodge} (was past {d0})");
    assert!(runs(port).iter().any(|r| r["name"] == "fight" && r["paused"] == true), "the pause outlives the restart");
    let r = http(port, "POST", "/api/v1/runs/fight/resume").unwrap();
    assert_eq!(status(&r), 200, "{r}");
    wait_for(HANG, "fight to train again after resume", || run_field(port, "fight", "train_steps") > fight + 50, &manager);
    w2.signal("TERM");
    assert!(w2.wait(HANG).success(), "fight worker log:\n{}", w2.log());
    let stats = read_stats(&d2);
    assert_eq!(u(&stats, "transitions_rejected") + u(&stats, "transitions_dropped_spool_full"), 0, "nothing the paused run refused was lost: {stats}");
}
