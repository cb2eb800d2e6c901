//! Self-play with real processes: a manager whose Fox run and Marth run are each
//! other's opponents (`testkit/configs/worker-selfplay.toml`, `worker-league.toml`), and one worker registered to the Fox run. Its uploads feed both
//! runs (the Marth run has no worker of its own), each run publishes models of its own
//! side, and the worker accounts for the opponent's transitions.

mod procs;

use procs::*;
use shine_agent::model::QNet;
use shine_agent::Side;

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
    let m = manager(dir.path(), "worker-selfplay.toml");
    let port = m.port;
    let manager = m.start();
    let wdir = dir.path().join("w");
    std::fs::create_dir_all(&wdir).unwrap();
    let mut worker = start_worker(&wdir, port, &["--run", "fox"]);

    // The Marth run trains on what the Fox run's worker plays as its opponent.
    wait_for(
        HANG,
        "both runs to take transitions and publish newer models",
        || ["fox", "marth"].iter().all(|r| run_field(port, r, "transitions_inserted") > 3000 && run_field(port, r, "model_version") >= 3),
        &manager,
    );
    assert_eq!((workers_of(port, "fox"), workers_of(port, "marth")), (1, 0), "one worker, registered to fox");
    wait_for(HANG, "the worker to load the Marth run's models", || worker.log().contains("self-play: the opponent's models"), &worker);
    for (run, side) in [("fox", Side::Fox), ("marth", Side::Marth)] {
        let bytes = get_body(port, &format!("/api/v1/runs/{run}/models/latest")).expect("the latest model");
        let net = QNet::load(&bytes).unwrap();
        assert_eq!((net.meta().side, net.meta().action_set.as_str()), (side, "fight"), "run {run}");
    }

    worker.signal("TERM");
    assert!(worker.wait(HANG).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(&wdir);
    let (generated, uploaded, spooled) = (u(&stats, "opponent_transitions_generated"), u(&stats, "opponent_transitions_uploaded"), u(&stats, "opponent_spooled_transitions"));
    assert!(generated > 3000, "{stats}");
    assert_eq!(uploaded + spooled, generated, "every opponent transition was taken or is still on disk: {stats}");
    assert!(wdir.join("spool/opponents/marth").is_dir(), "the opponent's spool is apart from any Marth worker's");
    // The manager counted the Marth run's uploads as they came from the worker.
    assert!(run_field(port, "marth", "transitions_inserted") >= uploaded.min(3000));
}

/// `POST` a JSON body with the token; the status.
fn post_json(port: u16, path: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "POST {path} HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    status(&out)
}

#[test]
fn league_matches_are_played_rated_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Half the worker's time on league matches, a model every 2 train steps, every
    // model that has played kept (worker-league.toml says why).
    let spec = manager(dir.path(), "worker-league.toml");
    let port = spec.port;
    let mut manager = spec.start();
    let wdir = dir.path().join("w");
    std::fs::create_dir_all(&wdir).unwrap();
    let mut worker = start_worker(&wdir, port, &["--run", "marth"]);
    let league = || get_json(port, "/api/v1/league").unwrap();
    wait_for(HANG, "the league to have 6 matches", || league()["matches"].as_u64().unwrap_or(0) >= 6, &worker);
    worker.signal("TERM");
    assert!(worker.wait(HANG).success(), "worker log:\n{}", worker.log());

    let before = league();
    let players = before["players"].as_array().unwrap();
    // Every kept model of both runs and the three anchors; each row as docs/api.md says.
    for cpu in [1, 5, 9] {
        assert!(players.iter().any(|p| p["cpu"] == cpu && p["side"].is_null() && p["player"] == format!("cpu {cpu}")), "anchor {cpu}: {before}");
    }
    for run in ["fox", "marth"] {
        let kept = get_json(port, &format!("/api/v1/runs/{run}/models")).unwrap()["models"].as_array().unwrap().len();
        assert_eq!(players.iter().filter(|p| p["run"] == run && p["side"] == run).count(), kept, "{run}'s kept models: {before}");
    }
    // Two places a match, every one listed: no model was pruned while it was played.
    let played: u64 = players.iter().map(|p| p["matches"].as_u64().unwrap()).sum();
    assert_eq!(played, 2 * before["matches"].as_u64().unwrap(), "{before}");
    for p in players.iter().filter(|p| p["matches"].as_u64().unwrap() > 0) {
        let (r, d, lo, hi) = (p["rating"].as_f64().unwrap(), p["deviation"].as_f64().unwrap(), p["low"].as_f64().unwrap(), p["high"].as_f64().unwrap());
        assert!(d < 350.0 && lo < r && r < hi && ((hi - lo) - 2.0 * 1.96 * d).abs() < 1.0, "{p}");
    }
    let top = before["head_to_head_players"].as_array().unwrap().len();
    assert!(top >= 2 && before["head_to_head"].as_array().unwrap().len() == top, "{before}");

    // Bad input changes nothing: an unknown match, an outcome its tally contradicts,
    // a result that is not one, an unknown run.
    let n = before["matches"].as_u64().unwrap();
    let result = |id: u64, outcome: &str| format!(r#"{{"match_id": {id}, "outcome": "{outcome}", "stocks_taken": 0, "stocks_lost": 4, "damage_dealt": 0, "damage_taken": 300}}"#);
    assert_eq!(post_json(port, "/api/v1/league/results", &result(999_999, "loss")), 404);
    assert_eq!(post_json(port, "/api/v1/league/results", r#"{"match_id": 1, "outcome": "triumph"}"#), 422);
    let unknown = http_get(port, "/api/v1/league?run=luigi").unwrap();
    assert!(status(&unknown) == 404 && unknown.contains("not_found"), "{unknown}");
    assert_eq!(league()["matches"].as_u64(), Some(n), "nothing recorded");
    // A match handed out and answered with a contradiction: refused.
    let m = get_json_post(port, "/api/v1/league/matches");
    let id = m["match_id"].as_u64().unwrap();
    assert_eq!(post_json(port, "/api/v1/league/results", &result(id, "win")), 422);
    assert_eq!(post_json(port, "/api/v1/league/results", &result(id, "loss")), 200);
    assert_eq!(post_json(port, "/api/v1/league/results", &result(id, "loss")), 404, "a result is taken once");
    let after = league();
    assert_eq!(after["matches"].as_u64(), Some(n + 1));

    // A restart replays the stored matches: the same table.
    manager.signal("TERM");
    assert!(manager.wait(HANG).success(), "manager log:\n{}", manager.log());
    let _manager = spec.start();
    // The runs train on and publish, so the table may list newer models; every player
    // still listed keeps its record exactly.
    let again = league();
    assert_eq!(again["matches"], after["matches"], "the league survives a restart");
    let rows = |t: &serde_json::Value| t["players"].as_array().unwrap().iter().map(|p| (p["player"].as_str().unwrap().to_string(), p.clone())).collect::<std::collections::HashMap<_, _>>();
    let (old_rows, new_rows) = (rows(&after), rows(&again));
    let mut same = 0;
    for (name, row) in &old_rows {
        if let Some(now) = new_rows.get(name) {
            assert_eq!(now, row, "{name} after the restart");
            same += 1;
        }
    }
    assert!(same >= 3, "the anchors at least are in both tables");
    // One run's table: its models and the anchors.
    let fox = get_json(port, "/api/v1/league?run=fox").unwrap();
    assert!(fox["players"].as_array().unwrap().iter().all(|p| p["run"] == "fox" || p["cpu"].is_u64()), "{fox}");
}

/// The JSON answer of a `POST` without a body.
fn get_json_post(port: u16, path: &str) -> serde_json::Value {
    let r = http(port, "POST", path).unwrap();
    serde_json::from_str(r.split_once("\r\n\r\n").unwrap().1).unwrap()
}
