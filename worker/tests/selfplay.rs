//! Self-play with real processes: a manager whose Fox run and Marth run are each
//! other's opponents, and one worker registered to the Fox run. Its uploads feed both
//! runs (the Marth run has no worker of its own), each run publishes models of its own
//! side, and the worker accounts for the opponent's transitions.

mod procs;

use procs::*;
use shine_agent::model::QNet;
use shine_agent::Side;
use std::time::Duration;

const RUNS: &str = r#"
[[runs]]
name = "fox"
game = { action_set = "fight", task = "fight", opponent_run = "marth", opponent_cpu_share = 0.0 }

[[runs]]
name = "marth"
game = { action_set = "fight", task = "fight", side = "marth", opponent_run = "fox" }
"#;

fn run_field(port: u16, run: &str, field: &str) -> u64 {
    get_json(port, &format!("/api/v1/runs/{run}")).and_then(|r| r[field].as_u64()).unwrap_or(0)
}

fn workers_of(port: u16, run: &str) -> usize {
    let list = get_json(port, &format!("/api/v1/runs/{run}/workers")).unwrap_or_default();
    list["workers"].as_array().map_or(0, |ws| ws.iter().filter(|w| w["state"] != "gone").count())
}

#[test]
fn a_self_play_worker_feeds_both_runs_and_each_publishes_its_own_side() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manager = start_manager_runs(dir.path(), port, 1, "burn_in = 1000\nsamples_per_insert = 0.0", RUNS);
    let wdir = dir.path().join("w");
    std::fs::create_dir_all(&wdir).unwrap();
    let mut worker = start_worker(&wdir, port, &["--run", "fox"]);

    // The Marth run trains on what the Fox run's worker plays as its opponent.
    wait_for(
        Duration::from_secs(240),
        "both runs to take transitions and publish newer models",
        || ["fox", "marth"].iter().all(|r| run_field(port, r, "transitions_inserted") > 3000 && run_field(port, r, "model_version") >= 3),
        &manager,
    );
    assert_eq!((workers_of(port, "fox"), workers_of(port, "marth")), (1, 0), "one worker, registered to fox");
    wait_for(Duration::from_secs(60), "the worker to load the Marth run's models", || worker.log().contains("self-play: the opponent's models"), &worker);
    for (run, side) in [("fox", Side::Fox), ("marth", Side::Marth)] {
        let bytes = get_body(port, &format!("/api/v1/runs/{run}/models/latest")).expect("the latest model");
        let net = QNet::load(&bytes).unwrap();
        assert_eq!((net.meta().side, net.meta().action_set.as_str()), (side, "fight"), "run {run}");
    }

    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(&wdir);
    let (generated, uploaded, spooled) = (u(&stats, "opponent_transitions_generated"), u(&stats, "opponent_transitions_uploaded"), u(&stats, "opponent_spooled_transitions"));
    assert!(generated > 3000, "{stats}");
    assert_eq!(uploaded + spooled, generated, "every opponent transition was taken or is still on disk: {stats}");
    assert!(wdir.join("spool/opponents/marth").is_dir(), "the opponent's spool is apart from any Marth worker's");
    // The manager counted the Marth run's uploads as they came from the worker.
    assert!(run_field(port, "marth", "transitions_inserted") >= uploaded.min(3000));
}
