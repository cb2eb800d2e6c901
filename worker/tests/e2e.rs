//! The real `shine-worker` against the real `shine-manager`, as two processes.
//!
//! `cargo test -p shine-worker` does not build the manager (it links libtorch, and the
//! worker's tests run in a cargo invocation of their own so the worker is built without
//! it): `scripts/test.sh` builds `shine-manager` into the same target dir first, and
//! these tests take it from beside their own executable. By hand:
//! ```text
//! . scripts/env.sh && cargo build -p shine-manager && cargo test -p shine-worker --test e2e
//! ```
//! (`SHINE_MANAGER_BIN` may point at another build.)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "e2e-secret";

fn manager_bin() -> PathBuf {
    // target/<profile>/deps/e2e-<hash> -> target/<profile>/shine-manager, whatever
    // CARGO_TARGET_DIR is.
    let beside = || std::env::current_exe().unwrap().parent().and_then(Path::parent).unwrap().join("shine-manager");
    let path = std::env::var_os("SHINE_MANAGER_BIN").map(PathBuf::from).unwrap_or_else(beside);
    assert!(path.exists(), "{} does not exist: build it with `. scripts/env.sh && cargo build -p shine-manager` (or set SHINE_MANAGER_BIN)", path.display());
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A small, fast manager: host replay, short burn-in, frequent publishing, quick
/// worker cadence.
fn write_manager_config(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("manager.toml");
    let data = dir.join("data");
    std::fs::write(
        &path,
        format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
data_dir = "{}"
token = "{TOKEN}"

[workers]
upload_every_transitions = 500
upload_every_secs = 0.5
model_poll_secs = 0.5
heartbeat_secs = 0.5

[trainer]
burn_in = 1000
samples_per_insert = 0.0
publish_every = 20
checkpoint_every = 0
device = "cpu"

[replay]
kind = "host"
capacity = 20000
update_size = 500

[dqn]
target_sync_every = 100
"#,
            data.display()
        ),
    )
    .unwrap();
    path
}

struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().unwrap().success();
        assert!(ok, "kill -{sig} failed");
    }
    /// Wait for the process to exit; its exit status.
    fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("process did not exit within {within:?}; log:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(cmd: &mut Command, log: PathBuf) -> Proc {
    let file = std::fs::File::create(&log).unwrap();
    let child = cmd.stdout(Stdio::from(file.try_clone().unwrap())).stderr(Stdio::from(file)).env("RUST_LOG", "info").spawn().unwrap();
    Proc { child, log }
}

fn start_manager(dir: &Path, port: u16, n: usize) -> Proc {
    let config = write_manager_config(dir, port);
    let p = spawn(Command::new(manager_bin()).arg("--config").arg(config), dir.join(format!("manager-{n}.log")));
    wait_for(Duration::from_secs(60), "the manager to answer /healthz", || http_get(port, "/healthz").is_some_and(|b| b.contains("ok")), &p);
    p
}

fn start_worker(dir: &Path, port: u16) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shine-worker"));
    cmd.args(["run", "--manager", &format!("http://127.0.0.1:{port}"), "--token", TOKEN, "--envs", "2", "--seed", "1"])
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .arg("--stats-file")
        .arg(dir.join("worker-stats.json"));
    spawn(&mut cmd, dir.join("worker.log"))
}

/// A plain HTTP/1.0 GET (no client library needed for two text endpoints).
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.starts_with("HTTP/1.").then_some(out)
}

/// A Prometheus counter or gauge without labels from `/metrics`.
fn metric(port: u16, name: &str) -> Option<f64> {
    let body = http_get(port, "/metrics")?;
    body.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

fn wait_for(within: Duration, what: &str, mut ok: impl FnMut() -> bool, p: &Proc) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}; log:\n{}", p.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn read_stats(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("worker-stats.json")).expect("the worker writes --stats-file when it exits");
    serde_json::from_str(&text).unwrap()
}

fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn worker_feeds_the_manager_and_plays_its_new_models() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let manager = start_manager(dir.path(), port, 1);
    let mut worker = start_worker(dir.path(), port);
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
    let mut worker = start_worker(dir.path(), port);
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
