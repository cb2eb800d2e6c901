//! The real `shine-worker` against the real `shine-manager`, as two processes (see
//! `procs/mod.rs` for how the manager binary is found).

mod procs;

use procs::*;
use std::time::Duration;

#[test]
fn worker_feeds_the_manager_and_plays_its_new_models() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manager = start_manager(dir.path(), port, 1);
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(Duration::from_secs(240), "experiences, train steps and a new model", || {
        metric(port, "shine_experiences_total").unwrap_or(0.0) >= 2000.0 && metric(port, "shine_train_steps_total").unwrap_or(0.0) > 0.0 && metric(port, "shine_model_version").unwrap_or(0.0) >= 2.0
    }, &manager);
    // The worker polls every 0.5 s: give it time to swap to a newer model.
    wait_for(Duration::from_secs(30), "the worker to play a newer model", || worker.log().contains("playing with a new model"), &worker);
    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(dir.path());
    assert!(u(&stats, "model_version") >= 2 && u(&stats, "model_swaps") >= 1, "{stats}");
    assert!(u(&stats, "transitions_generated") > 0);
    // SIGTERM flushed everything: all generated, all delivered, once.
    assert_eq!(u(&stats, "transitions_uploaded"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(u(&stats, "spooled_batches"), 0, "{stats}");
    let at_manager = metric(port, "shine_experiences_total").unwrap() as u64;
    assert_eq!(at_manager, u(&stats, "transitions_uploaded"), "the manager counted each transition once");
}

#[test]
fn no_transition_is_lost_or_doubled_when_the_manager_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut manager = start_manager(dir.path(), port, 1);
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(Duration::from_secs(120), "the first experiences", || metric(port, "shine_experiences_total").unwrap_or(0.0) >= 1000.0, &manager);

    // Freeze the worker so that the count read next is the first manager's final one
    // (an upload in flight finishes meanwhile), then stop the manager under it.
    worker.signal("STOP");
    std::thread::sleep(Duration::from_secs(1));
    let first = metric(port, "shine_experiences_total").unwrap() as u64;
    manager.signal("KILL");
    manager.wait(Duration::from_secs(10));
    worker.signal("CONT");
    // The worker plays on, fails to upload and spools.
    wait_for(Duration::from_secs(30), "the worker to notice the manager is gone", || worker.log().contains("cannot reach the manager"), &worker);
    std::thread::sleep(Duration::from_secs(2));

    let manager = start_manager(dir.path(), port, 2);
    wait_for(Duration::from_secs(60), "the worker to deliver its spool to the new manager", || metric(port, "shine_experiences_total").unwrap_or(0.0) > 0.0, &manager);
    std::thread::sleep(Duration::from_secs(2));
    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let second = metric(port, "shine_experiences_total").unwrap() as u64;
    let stats = read_stats(dir.path());
    assert_eq!(u(&stats, "transitions_dropped_spool_full") + u(&stats, "transitions_rejected"), 0, "{stats}");
    assert_eq!(u(&stats, "spooled_batches"), 0, "everything was delivered before exit: {stats}");
    assert_eq!(u(&stats, "transitions_uploaded"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(first + second, u(&stats, "transitions_generated"), "managers counted {first} + {second}; the worker generated {stats}");
    assert!(worker.log().contains("registered again"), "the worker re-registered with the new manager:\n{}", worker.log());
}

#[test]
fn the_rate_limiter_paces_the_worker_to_the_learner_and_loses_nothing() {
    // The simulator plays far faster than a debug-built learner trains on a CPU. With
    // 8 samples per insert held from both sides and a short queue, the manager answers
    // 503 while the learner catches up and the worker must pause, not drop anything.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manager = start_manager_with(dir.path(), port, 1, "samples_per_insert = 8.0\ninsert_slack = 500\ningest_queue = 2");
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(Duration::from_secs(180), "1,000 train steps", || metric(port, "shine_train_steps_total").unwrap_or(0.0) >= 1000.0, &manager);
    // Learner side: at most the target plus rate_slack (1,024 samples); insert side: the
    // inserts lead by at most insert_slack (500) plus one batch (500) of the 4,000 or so
    // that 1,000 steps of 32 take.
    let ratio = metric(port, "shine_samples_per_insert").unwrap();
    assert!((6.0..=8.5).contains(&ratio), "samples per insert {ratio}, target 8");
    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(dir.path());
    assert!(u(&stats, "busy_answers") > 0, "the manager held uploads back: {stats}");
    assert_eq!(u(&stats, "transitions_dropped_spool_full") + u(&stats, "transitions_rejected"), 0, "{stats}");
    assert_eq!(u(&stats, "transitions_uploaded"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(metric(port, "shine_experiences_total").unwrap() as u64, u(&stats, "transitions_uploaded"), "the manager counted each transition once");
}
