//! The manager's promises under real faults, with real processes: the `shine-manager`
//! binary killed with SIGKILL at random moments (and stopped with SIGTERM now and
//! then), restarted on the same data directory each time, while two uploaders (test
//! stand-ins for workers that tag every transition uniquely) keep sending and retrying
//! like `shine-worker` does, and a model watcher keeps downloading the latest model.
//!
//! At the end, counted by content: every transition answered 2xx is in the rebuilt
//! replay exactly once and no transition is in it twice; no model version was served
//! with two different bodies; and the training step never went back by more than the
//! checkpoint interval. Also: a full disk (a file-size limit) answers 503
//! `storage_full`, keeps everything acknowledged and keeps serving reads, also when the
//! limit's SIGXFSZ is left at its default action (which would kill the process); a byte
//! flipped in the log on disk costs only the upload it is in; and a log in the earlier
//! format (version 1) is recovered and continued.

mod common;

use common::{HANG, TOKEN};
use serde_json::Value;
use sha2::{Digest, Sha256};
use shine_agent::experience::{self, col, BatchMeta, Expect, TRANSITION_FLOATS};
use shine_manager::config::Config;
use shine_manager::storage::wal::{self, WalMeta};
use shine_testkit::manager::Manager;
use shine_testkit::Proc;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROWS: usize = 40;
const EXPECT: Expect = Expect { actions: 5, n_step: 1 };

/// A data directory and the manager for it: `chaos.toml` (testkit/configs) on a free
/// port, its log appended to across restarts.
struct Rig {
    dir: tempfile::TempDir,
    manager: Manager,
    url: String,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let manager = Manager::new(env!("CARGO_BIN_EXE_shine-manager"), "chaos.toml", dir.path(), TOKEN);
    Rig { url: manager.url(), manager, dir }
}

/// A manager process, up and answering.
fn start(rig: &Rig) -> Proc {
    rig.manager.start()
}

/// Send `sig` and wait for the process to exit; how it exited.
fn signal(p: &mut Proc, sig: &str) -> std::process::ExitStatus {
    p.signal(sig);
    p.wait(HANG)
}

/// `current` of the stats once the manager's ingest queue is empty: what its replay holds.
fn drained(url: &str) -> Value {
    let deadline = Instant::now() + HANG;
    loop {
        let v: Value = reqwest::blocking::get(format!("{url}/api/v1/stats")).unwrap().json().unwrap();
        if v["current"]["queued"] == 0 {
            return v["current"].clone();
        }
        assert!(Instant::now() < deadline, "the queue did not drain: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}


/// Upload `uploader`'s tagged batches until one is refused 503 `storage_full`: the tags
/// acknowledged (202) before it, and that refusal's body. An upload without an answer
/// fails the test with what became of the manager.
fn upload_until_storage_full(http: &reqwest::blocking::Client, url: &str, uploader: u32, manager: &mut Proc) -> (Vec<u32>, Value) {
    let mut acked = Vec::new();
    for seq in 0..2000 {
        let (body, tags) = tagged_upload(uploader, seq);
        let r = http
            .post(format!("{url}/api/v1/experience"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/octet-stream")
            .body(body)
            .send()
            .unwrap_or_else(|e| panic!("upload {seq} got no answer ({e}); the manager: {:?}", manager.child.try_wait().unwrap()));
        match r.status().as_u16() {
            202 => acked.extend(tags),
            503 => {
                let v: Value = r.json().unwrap();
                if v["error"]["code"] == "storage_full" {
                    return (acked, v);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            s => panic!("unexpected {s}"),
        }
    }
    panic!("the file-size limit was never reached")
}

/// Upload `tag`'s rows: every row's reward is its own unique number.
fn tagged_upload(uploader: u32, seq: u32) -> (Vec<u8>, Vec<u32>) {
    let base = uploader * 1_000_000 + seq * 100;
    let tags: Vec<u32> = (0..ROWS as u32).map(|i| base + i).collect();
    let data: Vec<f32> = tags
        .iter()
        .flat_map(|&t| {
            // Noise in the states, so the upload is about as large as real gameplay's.
            let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut r: Vec<f32> = (0..TRANSITION_FLOATS)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 40) as f32 / (1u64 << 24) as f32
                })
                .collect();
            r[col::ACTION] = (t % 5) as f32;
            r[col::REWARD] = t as f32;
            r[col::TERMINAL] = 0.0;
            r
        })
        .collect();
    let mut upload_id = [0u8; 16];
    upload_id[..4].copy_from_slice(&uploader.to_le_bytes());
    upload_id[4..8].copy_from_slice(&seq.to_le_bytes());
    upload_id[15] = 0xC4;
    (experience::encode(&BatchMeta { worker_id: uploader, model_version: 1, n_step: 1, upload_id }, &data, true), tags)
}

/// Send uploads one after another, each retried with its own bytes until a 2xx, like
/// a worker's spool; record what was acknowledged.
fn uploader(url: String, id: u32, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<u32>>>) {
    // A request is bounded only against a hang: one cut short on a slow machine would be
    // offered again and again, and nothing would get through.
    let http = reqwest::blocking::Client::builder().timeout(HANG).build().unwrap();
    let mut seq = 0u32;
    while !stop.load(Relaxed) {
        let (body, tags) = tagged_upload(id, seq);
        loop {
            let r =
                http.post(format!("{url}/api/v1/experience")).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(body.clone()).send();
            match r {
                Ok(r) if r.status().is_success() => {
                    acked.lock().unwrap().extend(&tags);
                    break;
                }
                // 503 (busy, or the log's disk) and connection errors while the manager
                // is down: offer the same bytes again.
                Ok(r) => assert_eq!(r.status(), 503, "only flow control may refuse a valid upload"),
                Err(_) => {}
            }
            if stop.load(Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seq += 1;
    }
}

/// Download the latest model now and then; every (version, body hash) seen.
fn model_watcher(url: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<HashMap<u64, HashSet<Vec<u8>>>>>) {
    let http = reqwest::blocking::Client::builder().timeout(HANG).build().unwrap();
    while !stop.load(Relaxed) {
        if let Ok(r) = http.get(format!("{url}/api/v1/models/latest")).send() {
            if r.status() == 200 {
                let v: u64 = r.headers()["x-shine-model-version"].to_str().unwrap().parse().unwrap();
                if let Ok(body) = r.bytes() {
                    seen.lock().unwrap().entry(v).or_default().insert(Sha256::digest(&body).to_vec());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}

fn train_steps(url: &str) -> Option<u64> {
    let v: Value = reqwest::blocking::get(format!("{url}/api/v1/stats")).ok()?.json().ok()?;
    v["current"]["train_steps"].as_u64()
}

#[test]
fn kill_9_at_random_moments_loses_nothing_acknowledged_and_repeats_nothing() {
    let rig = rig();
    let url = rig.url.clone();
    let mut manager = start(&rig);

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let models = Arc::new(Mutex::new(HashMap::new()));
    let mut threads = Vec::new();
    for id in 1..=2 {
        let (url, stop, acked) = (url.clone(), stop.clone(), acked.clone());
        threads.push(std::thread::spawn(move || uploader(url, id, stop, acked)));
    }
    {
        let (url, stop, models) = (url.clone(), stop.clone(), models.clone());
        threads.push(std::thread::spawn(move || model_watcher(url, stop, models)));
    }

    // A fixed seed: the same "random" moments on every run of the test.
    let mut rng = 0x5eed_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // The stops that stopped a serving manager: it answered just before the signal, and
    // the signal is what ended it (a SIGKILL kills it; a SIGTERM ends in a clean exit).
    let (mut kills, mut terms) = (0, 0);
    let mut stops = Vec::new();
    let mut steps_before: Vec<(u64, u64)> = Vec::new();
    for round in 0..24 {
        std::thread::sleep(Duration::from_millis(200 + next() % 900));
        let before = train_steps(&url);
        let answered = before.is_some();
        if round % 6 == 5 {
            let status = signal(&mut manager, "TERM");
            terms += usize::from(answered && status.success());
            stops.push(("TERM", answered, status));
        } else {
            let status = signal(&mut manager, "KILL");
            kills += usize::from(answered && status.signal() == Some(libc::SIGKILL));
            stops.push(("KILL", answered, status));
        }
        manager = start(&rig);
        let after = train_steps(&url).unwrap();
        steps_before.push((before.unwrap_or(0), after));
    }
    // Let the uploaders and the watcher get through, then stop them: the counts checked
    // below are waited for, however long this machine takes to reach them.
    let deadline = Instant::now() + HANG;
    while acked.lock().unwrap().len() <= 2000 || models.lock().unwrap().len() < 3 {
        assert!(Instant::now() < deadline, "the uploaders and the model watcher did not get through");
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!((kills, terms), (20, 4), "each stop found the manager serving and ended it (signal, answered before, exit): {stops:?}");

    // The step counter never went back by more than the checkpoint interval.
    let checkpoint_every = Config::from_file(&rig.manager.config).unwrap().trainer.checkpoint_every;
    assert!(checkpoint_every > 0, "chaos.toml checkpoints");
    for (before, after) in &steps_before {
        assert!(after + checkpoint_every >= *before, "train step went back from {before} to {after} (checkpoint every {checkpoint_every})");
    }
    // No version number was served with two bodies.
    let models = models.lock().unwrap();
    assert!(models.len() >= 3, "the watcher saw several versions: {}", models.len());
    for (v, bodies) in models.iter() {
        assert_eq!(bodies.len(), 1, "version {v} was served with {} different bodies", bodies.len());
    }

    // What the running manager holds once its queue is empty, and the log.
    let current = drained(&url);
    signal(&mut manager, "TERM");
    let rec = wal::recover(&rig.dir.path().join("data/runs/default/wal"), &WalMeta::new("untouchable", EXPECT), 1_000_000, EXPECT).unwrap();
    let mut count: BTreeMap<u32, u32> = BTreeMap::new();
    for row in rec.rows.chunks_exact(TRANSITION_FLOATS) {
        *count.entry(row[col::REWARD] as u32).or_default() += 1;
    }
    let twice: Vec<_> = count.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "transitions in the replay twice: {twice:?}");
    let acked = acked.lock().unwrap();
    assert!(acked.len() > 2000, "the uploaders got through: {} transitions acknowledged", acked.len());
    let lost: Vec<_> = acked.iter().filter(|t| !count.contains_key(t)).take(5).collect();
    assert!(lost.is_empty(), "acknowledged transitions missing from the replay (of {}): {lost:?}", acked.len());
    // The manager's replay held exactly the log's rows.
    let held = current["replay_size"].as_u64().unwrap() + current["replay_staged"].as_u64().unwrap();
    assert_eq!(held, (rec.rows.len() / TRANSITION_FLOATS) as u64, "{current}");
    assert_eq!(rec.corrupt, 0, "a kill -9 tears at most the tail, which is cut: {rec:?}");
    eprintln!(
        "chaos: {kills} kills, {terms} SIGTERMs; {} transitions acknowledged, {} in the log ({} records, {} repeats taken once); {} model versions seen",
        acked.len(),
        rec.rows.len() / TRANSITION_FLOATS,
        rec.records,
        rec.repeats,
        models.len()
    );
}

/// The manager command of `rig` under a file-size limit (RLIMIT_FSIZE): its writes beyond
/// it fail with EFBIG, as on a full disk. The kernel also sends SIGXFSZ, whose default
/// action kills the process; with `ignore_sigxfsz` the child starts with it ignored (as
/// under a parent that ignored it), without, it starts as under systemd's `LimitFSIZE=`
/// or a shell's `ulimit -f`, with the default action.
fn limited_command(rig: &Rig, max_file_bytes: u64, ignore_sigxfsz: bool) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = rig.manager.command();
    // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: max_file_bytes, rlim_max: max_file_bytes };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if ignore_sigxfsz {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    c
}

/// `shine-manager` under a file-size limit, SIGXFSZ ignored, up and answering.
fn start_limited(rig: &Rig, max_file_bytes: u64) -> Proc {
    rig.manager.start_command(limited_command(rig, max_file_bytes, true))
}

#[test]
fn a_full_disk_answers_503_storage_full_and_keeps_what_was_acknowledged() {
    let rig = rig();
    let url = rig.url.clone();
    // Segments of 1 MiB, files limited to 700 KB: the first segment fills up.
    let mut manager = start_limited(&rig, 700_000);
    let http = reqwest::blocking::Client::new();
    let (acked, full) = upload_until_storage_full(&http, &url, 7, &mut manager);
    assert!(full["error"]["message"].as_str().unwrap().contains("disk is full"), "{full}");
    // Still serving reads, and still refusing (not corrupting) further uploads.
    assert_eq!(http.get(format!("{url}/api/v1/stats")).send().unwrap().status(), 200);
    assert_eq!(http.get(format!("{url}/api/v1/models/latest")).send().unwrap().status(), 200);
    let (body, _) = tagged_upload(7, 9999);
    let r = http.post(format!("{url}/api/v1/experience")).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(body).send().unwrap();
    assert_eq!(r.status(), 503);
    let text = http.get(format!("{url}/metrics")).send().unwrap().text().unwrap();
    assert!(common::metric(&text, "shine_uploads_rejected_total{reason=\"storage_full\",run=\"default\"}").unwrap() >= 2.0, "{text}");
    signal(&mut manager, "KILL");

    // Everything acknowledged is in the log, whole.
    let rec = wal::recover(&rig.dir.path().join("data/runs/default/wal"), &WalMeta::new("untouchable", EXPECT), 1_000_000, EXPECT).unwrap();
    assert_eq!((rec.corrupt, rec.torn_bytes), (0, 0), "failed writes were cut back: {rec:?}");
    let held: HashSet<u32> = rec.rows.chunks_exact(TRANSITION_FLOATS).map(|r| r[col::REWARD] as u32).collect();
    assert!(!acked.is_empty());
    assert!(acked.iter().all(|t| held.contains(t)), "every acknowledged transition was kept");
    assert_eq!(held.len(), acked.len(), "and nothing that was refused");
}

/// Under systemd's `LimitFSIZE=` (or `ulimit -f`) SIGXFSZ keeps its default action, which
/// kills the process: the manager itself must not let it, so that the write fails with
/// EFBIG and the upload is answered `503 storage_full`, as on a full disk.
#[test]
fn a_file_size_limit_with_sigxfsz_at_its_default_answers_503_and_the_manager_lives_on() {
    let rig = rig();
    let url = rig.url.clone();
    // Segments of 1 MiB, files limited to 700 KB: the first segment hits the limit.
    let mut manager = rig.manager.start_command(limited_command(&rig, 700_000, false));
    let http = reqwest::blocking::Client::new();
    let post =
        |body: Vec<u8>| http.post(format!("{url}/api/v1/experience")).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(body).send();
    let (acked, full) = upload_until_storage_full(&http, &url, 8, &mut manager);
    assert!(full["error"]["message"].as_str().unwrap().contains("disk is full"), "{full}");
    assert!(manager.child.try_wait().unwrap().is_none(), "the manager is still running");
    assert_eq!(http.get(format!("{url}/healthz")).send().unwrap().status(), 200);
    // A second try is refused the same way, and the manager still lives.
    let (body, _) = tagged_upload(8, 9999);
    let r = post(body).unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.json::<Value>().unwrap()["error"]["code"], "storage_full");
    assert!(manager.child.try_wait().unwrap().is_none(), "the manager is still running after a second refusal");
    signal(&mut manager, "KILL");

    // Restarted without the limit: every acknowledged upload is back in the replay,
    // each once, and a retry of one is recognised as a repeat.
    assert!(!acked.is_empty());
    let mut manager = start(&rig);
    let current = drained(&url);
    let held = current["replay_size"].as_u64().unwrap() + current["replay_staged"].as_u64().unwrap();
    assert_eq!(held, acked.len() as u64, "{current}");
    let r = post(tagged_upload(8, 0).0).unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().unwrap()["duplicate"], true);
    signal(&mut manager, "TERM");
    let rec = wal::recover(&rig.dir.path().join("data/runs/default/wal"), &WalMeta::new("untouchable", EXPECT), 1_000_000, EXPECT).unwrap();
    let kept: HashSet<u32> = rec.rows.chunks_exact(TRANSITION_FLOATS).map(|r| r[col::REWARD] as u32).collect();
    assert!(acked.iter().all(|t| kept.contains(t)), "every acknowledged transition was kept");
    assert_eq!((kept.len(), rec.corrupt), (acked.len(), 0));
}

/// A byte flipped on disk in the length field of one record of the log costs that upload
/// only: after a restart every other acknowledged upload is back (in the replay, and in
/// the dedup window), the damaged one is counted as skipped, and its worker's retry is
/// taken as new.
#[test]
fn a_flipped_length_byte_in_the_log_loses_that_upload_only() {
    let rig = rig();
    let url = rig.url.clone();
    let mut manager = start(&rig);
    let http = reqwest::blocking::Client::new();
    let post = |body: Vec<u8>| {
        let r = http.post(format!("{url}/api/v1/experience")).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(body).send().unwrap();
        let status = r.status().as_u16();
        (status, r.json::<Value>().unwrap())
    };
    let uploads: Vec<(Vec<u8>, Vec<u32>)> = (0..12).map(|seq| tagged_upload(9, seq)).collect();
    for (body, _) in &uploads {
        assert_eq!(post(body.clone()).0, 202);
    }
    signal(&mut manager, "KILL");

    // Flip the top byte of upload 5's length, found as the 4 bytes before its payload
    // (the upload's bytes) that hold its length: the framing is the manager's business.
    let wal_dir = rig.dir.path().join("data/runs/default/wal");
    let seg = std::fs::read_dir(&wal_dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "seg")).unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let (lost_body, lost_tags) = &uploads[5];
    let payload_at = bytes.windows(lost_body.len()).position(|w| w == lost_body.as_slice()).unwrap();
    let len = (lost_body.len() as u32).to_le_bytes();
    let len_at = (payload_at.saturating_sub(32)..payload_at).rev().find(|&i| bytes[i..i + 4] == len).expect("the length field");
    bytes[len_at + 3] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();

    let mut manager = start(&rig);
    let current = drained(&url);
    let held = current["replay_size"].as_u64().unwrap() + current["replay_staged"].as_u64().unwrap();
    assert_eq!(held, 11 * ROWS as u64, "11 of the 12 uploads are back: {current}");
    let log = manager.log();
    assert!(log.contains("corrupt_skipped=1 "), "the restart counted one corrupt record:\n{log}");
    for (i, (body, _)) in uploads.iter().enumerate() {
        let (status, v) = post(body.clone());
        if i == 5 {
            assert_eq!((status, &v["duplicate"]), (202, &Value::Bool(false)), "the damaged upload's retry is taken: {v}");
        } else {
            assert_eq!((status, &v["duplicate"]), (200, &Value::Bool(true)), "upload {i} is known after the restart: {v}");
        }
    }
    signal(&mut manager, "TERM");
    let rec = wal::recover(&wal_dir, &WalMeta::new("untouchable", EXPECT), 1_000_000, EXPECT).unwrap();
    let kept: HashSet<u32> = rec.rows.chunks_exact(TRANSITION_FLOATS).map(|r| r[col::REWARD] as u32).collect();
    assert!(uploads.iter().flat_map(|(_, t)| t).all(|t| kept.contains(t)), "every upload is in the log, the damaged one by its retry");
    assert_eq!((kept.len(), rec.corrupt, rec.torn_bytes), (12 * ROWS, 1, 0));
    assert!(lost_tags.iter().all(|t| kept.contains(t)));
}

/// A data directory whose log an earlier shine-manager wrote (format version 1: `len,
/// crc32, payload` records, meta.json `version: 1`): a manager started on it takes every
/// upload back, writes new ones, and after a `kill -9` has both.
#[test]
fn a_log_in_the_old_format_is_recovered_and_continued() {
    let rig = rig();
    let url = rig.url.clone();
    let wal_dir = rig.dir.path().join("data/runs/default/wal");
    std::fs::create_dir_all(&wal_dir).unwrap();
    let mut old_meta = WalMeta::new("untouchable", EXPECT);
    old_meta.version = 1;
    std::fs::write(wal_dir.join("meta.json"), serde_json::to_vec_pretty(&old_meta).unwrap()).unwrap();
    let old: Vec<(Vec<u8>, Vec<u32>)> = (0..6).map(|seq| tagged_upload(10, seq)).collect();
    let mut segment = Vec::new();
    for (body, _) in &old {
        segment.extend_from_slice(&(body.len() as u32).to_le_bytes());
        segment.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        segment.extend_from_slice(body);
    }
    std::fs::write(wal_dir.join(format!("{:016x}.seg", 0)), &segment).unwrap();

    let http = reqwest::blocking::Client::new();
    let post = |body: Vec<u8>| {
        let r = http.post(format!("{url}/api/v1/experience")).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(body).send().unwrap();
        let status = r.status().as_u16();
        (status, r.json::<Value>().unwrap())
    };
    let held = || {
        let current = drained(&url);
        current["replay_size"].as_u64().unwrap() + current["replay_staged"].as_u64().unwrap()
    };
    let mut manager = start(&rig);
    assert_eq!(held(), 6 * ROWS as u64, "every old-format upload is back");
    assert_eq!(post(old[3].0.clone()), (200, serde_json::json!({"accepted": 0, "duplicate": true})));
    let new: Vec<(Vec<u8>, Vec<u32>)> = (6..10).map(|seq| tagged_upload(10, seq)).collect();
    for (body, _) in &new {
        assert_eq!(post(body.clone()).0, 202);
    }
    signal(&mut manager, "KILL");
    assert_eq!(std::fs::read(wal_dir.join(format!("{:016x}.seg", 0))).unwrap(), segment, "the old segment is left as it was");

    let mut manager = start(&rig);
    assert_eq!(held(), 10 * ROWS as u64, "old and new uploads are back");
    signal(&mut manager, "TERM");
    let rec = wal::recover(&wal_dir, &WalMeta::new("untouchable", EXPECT), 1_000_000, EXPECT).unwrap();
    let kept: HashSet<u32> = rec.rows.chunks_exact(TRANSITION_FLOATS).map(|r| r[col::REWARD] as u32).collect();
    assert!(old.iter().chain(&new).flat_map(|(_, t)| t).all(|t| kept.contains(t)));
    assert_eq!((kept.len(), rec.records, rec.corrupt, rec.torn_bytes), (10 * ROWS, 10, 0, 0));
}
