//! The real `shine-worker` against the real `shine-manager`, as two processes (see
//! `procs/mod.rs` for how the manager binary is found).

mod procs;

use procs::*;
use std::time::Duration;

#[test]
fn worker_feeds_the_manager_and_plays_its_new_models() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-e2e.toml");
    let port = m.port;
    let manager = m.start();
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(
        Duration::from_secs(600),
        "experiences, train steps and a new model",
        || {
            metric(port, "shine_transitions_accepted_total").unwrap_or(0.0) >= 2000.0
                && metric(port, "shine_train_steps_total").unwrap_or(0.0) > 0.0
                && metric(port, "shine_model_version").unwrap_or(0.0) >= 2.0
        },
        &manager,
    );
    // The worker polls every 0.5 s: give it time to swap to a newer model.
    wait_for(Duration::from_secs(300), "the worker to play a newer model", || worker.log().contains("playing with a new model"), &worker);
    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(dir.path());
    assert!(u(&stats, "model_version") >= 2 && u(&stats, "model_swaps") >= 1, "{stats}");
    assert!(u(&stats, "transitions_generated") > 0);
    // SIGTERM flushed everything: all generated, all delivered, once.
    assert_eq!(u(&stats, "transitions_uploaded"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(u(&stats, "spooled_batches"), 0, "{stats}");
    let at_manager = metric(port, "shine_transitions_accepted_total").unwrap() as u64;
    assert_eq!(at_manager, u(&stats, "transitions_uploaded"), "the manager counted each transition once");
}

#[test]
fn no_transition_is_lost_or_doubled_when_the_manager_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-e2e.toml");
    let port = m.port;
    let mut manager = m.start();
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(Duration::from_secs(600), "the first experiences", || metric(port, "shine_transitions_accepted_total").unwrap_or(0.0) >= 1000.0, &manager);

    // Freeze the worker so that the count read next is the first manager's final one
    // (an upload in flight finishes meanwhile: wait until the count holds still over
    // two seconds, as a loaded manager may take a while), then stop the manager.
    worker.signal("STOP");
    let mut first = metric(port, "shine_transitions_accepted_total").unwrap() as u64;
    wait_for(
        Duration::from_secs(300),
        "the first manager's count to settle",
        || {
            std::thread::sleep(Duration::from_secs(2));
            let now = metric(port, "shine_transitions_accepted_total").unwrap() as u64;
            std::mem::replace(&mut first, now) == now
        },
        &manager,
    );
    manager.signal("KILL");
    manager.wait(Duration::from_secs(10));
    worker.signal("CONT");
    // The worker plays on, fails to upload and spools.
    wait_for(Duration::from_secs(300), "the worker to notice the manager is gone", || worker.log().contains("cannot reach the manager"), &worker);
    std::thread::sleep(Duration::from_secs(2));

    let manager = m.start();
    wait_for(
        Duration::from_secs(300),
        "the worker to deliver its spool to the new manager",
        || metric(port, "shine_transitions_accepted_total").unwrap_or(0.0) > 0.0,
        &manager,
    );
    std::thread::sleep(Duration::from_secs(2));
    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let second = metric(port, "shine_transitions_accepted_total").unwrap() as u64;
    let stats = read_stats(dir.path());
    assert_eq!(u(&stats, "transitions_dropped_spool_full") + u(&stats, "transitions_rejected"), 0, "{stats}");
    assert_eq!(u(&stats, "spooled_batches"), 0, "everything was delivered before exit: {stats}");
    assert_eq!(u(&stats, "transitions_uploaded"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(first + second, u(&stats, "transitions_generated"), "managers counted {first} + {second}; the worker generated {stats}");
    assert!(worker.log().contains("registered again"), "the worker re-registered with the new manager:\n{}", worker.log());
}

#[test]
fn the_rate_limiter_paces_the_worker_to_the_learner_and_loses_nothing() {
    // 128 samples per insert is 4 train steps of 32 for every transition: no learner
    // (at most some 1,000 steps a second here, a debug build on a CPU) keeps up with a
    // worker playing 2 environments (some 800 transitions a second). So inserts are
    // held back (a queue of one upload, 100 transitions of slack), the manager answers 503
    // and the worker must pause, not drop anything. (At 8 samples per insert, which
    // side was slower depended on the machine: CI once saw no 503 at all.)
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-rate-limited.toml");
    let trainer = |key| config_number(&m, "trainer", key);
    let (ratio, insert_slack, rate_slack, upload) =
        (trainer("samples_per_insert"), trainer("insert_slack"), trainer("rate_slack"), trainer("ingest_queue_transitions"));
    assert_eq!(upload, config_number(&m, "workers", "upload_every_transitions"), "the queue holds one upload");
    const BATCH: f64 = 32.0; // [dqn] batch_size, the default
    let port = m.port;
    let manager = m.start();
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(Duration::from_secs(600), "3,000 train steps", || metric(port, "shine_train_steps_total").unwrap_or(0.0) >= 3000.0, &manager);
    // The pause is what this test is about, so wait until the manager has held an
    // upload back rather than hope it happened by the 3,000th step: on a loaded CI
    // machine the worker once never outran the learner that early (busy_answers 0).
    let busy = || run_metric_labels(port, "shine_uploads_rejected_total", "reason=\"busy\",run=\"default\"").unwrap_or(0.0);
    wait_for(Duration::from_secs(600), "an upload answered 503 busy", || busy() > 0.0, &manager);
    // Both sides of the ratio, each read so that the other counter can only have grown
    // meanwhile. The manager counts an upload when it queues it, so the inserts lead
    // by at most insert_slack, the upload taken before the limiter looked again and
    // the one waiting in the queue:
    let inserted = metric(port, "shine_transitions_accepted_total").unwrap();
    let sampled = metric(port, "shine_train_steps_total").unwrap() * BATCH;
    assert!(inserted <= sampled / ratio + insert_slack + 2.0 * upload, "{inserted} inserted is too far ahead of {sampled} sampled");
    // ... and the learner leads by at most rate_slack plus one batch.
    let sampled = metric(port, "shine_train_steps_total").unwrap() * BATCH;
    let inserted = metric(port, "shine_transitions_accepted_total").unwrap();
    assert!(sampled <= ratio * inserted + rate_slack + BATCH, "{sampled} sampled is too far ahead of {inserted} inserted");

    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(dir.path());
    assert!(u(&stats, "busy_answers") > 0, "the manager held uploads back: {stats}");
    // The actor paused: when it stopped, no more batches waited than the spool's pause
    // threshold, the one the spooler held, the hand-over channel and the actor's last
    // partial batch (with a hand-over channel of 64 it played on for 20 more).
    let waiting = shine_worker::pipeline::uploader::BACKLOG_PAUSE + 1 + shine_worker::run::HANDOVER_BATCHES as u64 + 1;
    assert!(u(&stats, "spooled_batches") <= waiting, "the worker played on while the manager was busy: {stats}");
    // Nothing lost: what the manager has not taken yet (the learner needs 4 steps per
    // transition, and the shutdown flush stops after 15 s) stays spooled on disk.
    assert_eq!(u(&stats, "transitions_dropped_spool_full") + u(&stats, "transitions_rejected"), 0, "{stats}");
    assert_eq!(u(&stats, "transitions_uploaded") + u(&stats, "spooled_transitions"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(metric(port, "shine_transitions_accepted_total").unwrap() as u64, u(&stats, "transitions_uploaded"), "the manager counted each transition once");
}

#[test]
fn a_busy_manager_gets_larger_batches_never_past_its_queue() {
    // The learner cannot keep up (128 samples per insert), so uploads are answered 503;
    // the queue holds four uploads of 50 (insert_slack 200): the worker's batches
    // double to 100 and 200 transitions, and no further. (Uploads of 50, not
    // worker-e2e.toml's 500: the learner takes 4 train steps for every transition, and
    // the dozen uploads this test waits on cost a tenth of the steps. The rest of the
    // premise is in worker-busy.toml.)
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-busy.toml");
    let (queue, upload) = (config_number(&m, "trainer", "ingest_queue_transitions"), config_number(&m, "workers", "upload_every_transitions"));
    assert_eq!((queue, upload), (200.0, 50.0), "the queue holds four uploads of 50");
    let port = m.port;
    let manager = m.start();
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(Duration::from_secs(600), "batches scaled up four times", || worker.log().contains("scale=4"), &manager);
    // The batches made before (the spool's backlog, the hand-over channel, the one in
    // the making: up to 8) go first; then four of the larger ones are measured.
    let uploads = || metric(port, "shine_uploads_total").unwrap_or(0.0);
    let start = uploads();
    wait_for(Duration::from_secs(600), "the older batches sent", || uploads() >= start + 8.0, &manager);
    let (a0, u0) = (metric(port, "shine_transitions_accepted_total").unwrap(), uploads());
    wait_for(Duration::from_secs(600), "four more uploads", || uploads() >= u0 + 4.0, &manager);
    let (a1, u1) = (metric(port, "shine_transitions_accepted_total").unwrap(), uploads());
    worker.signal("TERM");
    assert!(worker.wait(Duration::from_secs(60)).success(), "worker log:\n{}", worker.log());
    let per_upload = (a1 - a0) / (u1 - u0);
    assert!(per_upload > 100.0, "uploads grew past 50 transitions: {per_upload:.0} each ({} uploads)", u1 - u0);
    assert!(!worker.log().contains("scale=8"), "never past the queue (200 = 4 x 50):\n{}", worker.log());
    let stats = read_stats(dir.path());
    assert!(u(&stats, "busy_answers") > 0, "{stats}");
    assert_eq!(u(&stats, "transitions_dropped_spool_full") + u(&stats, "transitions_rejected"), 0, "nothing lost: {stats}");
}

#[test]
fn a_refused_token_stops_the_worker_and_keeps_its_spool() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-e2e.toml");
    let port = m.port;
    let mut manager = m.start();
    let mut worker = start_worker(dir.path(), port, &[]);
    wait_for(HANG, "the first experiences", || metric(port, "shine_transitions_accepted_total").unwrap_or(0.0) >= 1000.0, &manager);
    // The operator rotates the token and restarts the manager; this worker still has
    // the old one. Its uploads are refused: retrying cannot help, so it stops, with an
    // error that says what to check, and what it played stays spooled.
    manager.signal("TERM");
    manager.wait(HANG);
    let _manager = Manager { token: "a-rotated-token".into(), ..m }.start();
    let status = worker.wait(HANG);
    assert!(!status.success(), "a worker whose token is refused exits with an error; log:\n{}", worker.log());
    let log = worker.log();
    assert!(log.contains("the manager refused our token") && log.contains("--token"), "{log}");
    let spooled = std::fs::read_dir(dir.path().join("spool")).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "shxp")).count();
    assert!(spooled > 0, "the refused gameplay stays spooled for the next start; log:\n{log}");
}

#[test]
fn play_and_eval_take_their_model_from_a_managers_address() {
    // Issue 46: a player's model, fetched by the worker from a manager (docs/play-your-bot.md).
    // The manager keeps its reads private here, so the token matters too. A fresh run
    // publishes version 1 (random weights) at once: no training is needed for this.
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path(), "worker-e2e-private.toml");
    let port = m.port;
    let manager = m.start();
    wait_for(HANG, "a published model", || metric(port, "shine_model_version").unwrap_or(0.0) >= 1.0, &manager);
    // One version, by its address and as a file downloaded by hand: the same weights,
    // the same evaluation.
    let version = metric(port, "shine_model_version").unwrap() as u64;
    let url = format!("http://127.0.0.1:{port}/api/v1/models/{version}");
    let file = dir.path().join("bot.safetensors");
    std::fs::write(&file, get_body(port, &format!("/api/v1/models/{version}")).unwrap()).unwrap();
    let eval = |model: &str, token: Option<&str>| {
        let mut args = vec!["eval", "--model", model, "--episodes", "3"];
        args.extend(token.map(|t| ["--token", t]).into_iter().flatten());
        run_worker(&args)
    };
    let (ok, by_url, err) = eval(&url, Some(TOKEN));
    assert!(ok, "{err}");
    let (ok, by_file, err) = eval(file.to_str().unwrap(), None);
    assert!(ok, "{err}");
    assert_eq!(by_url, by_file, "the address and the file are the same model");
    assert!(by_url.starts_with(&format!("model v{version}, ")), "{by_url}");
    // Without the token this manager says no, and the error says what to pass.
    let (ok, _, err) = eval(&url, None);
    assert!(!ok && err.contains(&format!("downloading the model from {url}")) && err.contains("pass its token with --token or SHINE_TOKEN"), "{err}");
    // A version it does not have: what the manager answered.
    let (ok, _, err) = eval(&format!("http://127.0.0.1:{port}/api/v1/models/999999"), Some(TOKEN));
    assert!(!ok && err.contains("404"), "{err}");
    // docs/play-your-bot.md's command with the model's address: the run's latest model
    // against a person (`shine-dolphin-peer` stands in for Dolphin, its stand-in for the
    // person), the token from SHINE_TOKEN.
    let scenario = dir.path().join("melee.scenario");
    // Melee's clock ends the match: a model of random weights may stay out of the
    // level-9 CPU's reach for ever (1 run in 8 did, before the clock).
    std::fs::write(&scenario, "seed = 46\nhuman_level = 9\nstocks = 1\ntime_limit = 60\n").unwrap();
    let latest = format!("http://127.0.0.1:{port}/api/v1/runs/default/models/latest");
    let peer = peer();
    let args = ["play", "--backend", "dolphin", "--iso", scenario.to_str().unwrap(), "--model", &latest, "--human-port", "1", "--episodes", "1"];
    let (ok, stdout, stderr) = run_worker_with(&args, |c| {
        c.args(["--dolphin", peer.to_str().unwrap()]).env("SHINE_TOKEN", TOKEN);
    });
    assert!(ok, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("(the bot is Fox on port 2)") && stdout.contains("match   1: you as Luigi: ") && stdout.contains(" of 1 matches against you"),
        "{stdout}\n{stderr}"
    );
}
