//! Real processes for the worker's end-to-end tests: the manager, the worker, and
//! `shine-dolphin-peer` (bridge's stand-in for Dolphin), with small helpers to wait on
//! them and read their metrics.
//!
//! `cargo test -p shine-worker` does not build the manager (it links libtorch, and the
//! worker's tests run in a cargo invocation of their own so the worker is built without
//! it): `scripts/test.sh` builds `shine-manager` into the same target dir first, and
//! these tests take it from beside their own executable
//! (`shine_testkit::manager::beside_tests`), with a test config from `testkit/configs/`.
//! By hand:
//! ```text
//! . scripts/env.sh && cargo build -p shine-manager && cargo test -p shine-worker --test e2e
//! ```
//! (`SHINE_MANAGER_BIN` may point at another build.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(unused_imports)] // not every test file uses each
pub use shine_testkit::{manager::Manager, spawn, wait_for, Proc, HANG};

pub const WORKER: &str = env!("CARGO_BIN_EXE_shine-worker");

pub const TOKEN: &str = "e2e-secret";

/// The manager of a worker test: the test config `config` (a file in testkit/configs:
/// `worker-e2e.toml` is the small, fast one with the rate limiter off, the others say
/// what they change) on a free port, its data in `dir/data`, its log `dir/manager.log`,
/// the token [`TOKEN`]. `.start()` starts it (again, for a restart) and waits until it
/// answers.
pub fn manager(dir: &Path, config: &str) -> Manager {
    Manager::new(shine_testkit::manager::beside_tests(), config, dir, TOKEN)
}

/// A number in `m`'s config file: `[section] key`, an integer or a float.
pub fn config_number(m: &Manager, section: &str, key: &str) -> f64 {
    let text = std::fs::read_to_string(&m.config).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", m.config.display()));
    let v = &table[section][key];
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).unwrap_or_else(|| panic!("{}: no number [{section}] {key}", m.config.display()))
}

/// `shine-worker run` for the manager on `port`, two environments, seed 1, its spool
/// and `--stats-file` in `dir`; `extra` arguments go last.
pub fn start_worker(dir: &Path, port: u16, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(WORKER);
    cmd.args(["run", "--manager", &format!("http://127.0.0.1:{port}"), "--token", TOKEN, "--envs", "2", "--seed", "1"])
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .arg("--stats-file")
        .arg(dir.join("worker-stats.json"))
        .args(extra);
    spawn(&mut cmd, dir.join("worker.log"))
}

/// A plain HTTP/1.0 GET (no client library needed for a few small requests).
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http(port, "GET", path)
}

/// `method path` without a body, with the token; the whole response (status line,
/// headers, body).
pub fn http(port: u16, method: &str, path: &str) -> Option<String> {
    // A model download is binary: its body comes back lossily here (see `get_body`).
    let out = String::from_utf8_lossy(&http_bytes(port, method, path)?).into_owned();
    out.starts_with("HTTP/1.").then_some(out)
}

/// [`http`]'s whole response as bytes.
fn http_bytes(port: u16, method: &str, path: &str) -> Option<Vec<u8>> {
    shine_testkit::http(port, method, path, Some(TOKEN))
}

/// The status code of a whole response ([`http`]'s answer); 0 when there is none.
pub fn status(response: &str) -> u16 {
    response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The body of a GET answered 200, byte for byte (a model file).
pub fn get_body(port: u16, path: &str) -> Option<Vec<u8>> {
    let out = http_bytes(port, "GET", path)?;
    let end = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    out.starts_with(b"HTTP/1.0 200").then(|| out[end + 4..].to_vec()).or_else(|| out.starts_with(b"HTTP/1.1 200").then(|| out[end + 4..].to_vec()))
}

/// The JSON body of a GET.
pub fn get_json(port: u16, path: &str) -> Option<serde_json::Value> {
    let r = http_get(port, path)?;
    serde_json::from_str(r.split_once("\r\n\r\n")?.1).ok()
}

/// A Prometheus counter or gauge of the run `default` from `/metrics`.
pub fn metric(port: u16, name: &str) -> Option<f64> {
    run_metric(port, name, "default")
}

/// A Prometheus counter or gauge of `run` (its only label) from `/metrics`.
pub fn run_metric(port: u16, name: &str, run: &str) -> Option<f64> {
    run_metric_labels(port, name, &format!("run=\"{run}\""))
}

/// A Prometheus series with exactly these labels (as rendered: sorted by name).
pub fn run_metric_labels(port: u16, name: &str, labels: &str) -> Option<f64> {
    shine_testkit::metric(&http_get(port, "/metrics")?, &format!("{name}{{{labels}}}"))
}

pub fn read_stats(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("worker-stats.json")).expect("the worker writes --stats-file when it exits");
    serde_json::from_str(&text).unwrap()
}

pub fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// `shine-dolphin-peer` is a binary of shine-bridge: build it into this target dir (a
/// no-op when fresh), once per test process, and return its path.
pub fn peer() -> &'static Path {
    static PEER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PEER.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let target = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf(); // target/<profile>
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let profile = target.file_name().unwrap().to_string_lossy().into_owned();
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "shine-bridge", "--bin", "shine-dolphin-peer"]).env("CARGO_TARGET_DIR", target.parent().unwrap());
        if profile == "release" {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo to build shine-dolphin-peer");
        assert!(status.success(), "building shine-dolphin-peer failed");
        target.join("shine-dolphin-peer")
    })
}

/// A model file with random weights (seeded by `version`) for `set`, playing `side`,
/// in `dir`; its path.
pub fn side_model_file(dir: &Path, set: shine_agent::actions::ActionSet, side: shine_agent::Side, version: u64) -> String {
    use rand::SeedableRng;
    let mut meta = shine_agent::model::ModelMeta::new(set.name(), set.len()).with_side(side);
    meta.model_version = version;
    let weights = shine_agent::model::random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(version));
    let path = dir.join(format!("{}-{side}-v{version}.safetensors", set.name()));
    std::fs::write(&path, shine_agent::model::save(&meta, &weights).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// `shine-worker` with `args`, to its end: whether it succeeded, its stdout and stderr.
pub fn run_worker(args: &[&str]) -> (bool, String, String) {
    run_worker_with(args, |_| {})
}

/// [`run_worker`], the command first set up by `configure` (its folder, its
/// environment). Like every wait here, bounded: a worker still running after [`HANG`]
/// is killed and the test fails with its stderr.
pub fn run_worker_with(args: &[&str], configure: impl FnOnce(&mut Command)) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut cmd = Command::new(WORKER);
    cmd.args(args).env_remove("RUST_BACKTRACE");
    configure(&mut cmd);
    let child = cmd.stdout(std::fs::File::create(&out).unwrap()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap();
    let status = Proc { child, log: err.clone() }.wait(HANG);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (status.success(), read(&out), read(&err))
}
