//! Launching a worker fleet from the files in `configs/`, against a real manager.
//!
//! No cloud, container engine or init system here, so each launch path is replayed as
//! far as this machine allows, from the files themselves rather than from a re-typed
//! copy of them:
//! - the image (`fleet/image.rs`): the build stage of
//!   `configs/container/Containerfile.worker` (read by `fleet/containerfile.rs`)
//!   replayed on a clean copy of exactly the files it COPYs, its runtime stage applied
//!   to a folder standing in for the image's root.
//! - a VM: the setup script from the AWS user-data that `shine-manager launch-script`
//!   prints, run with its paths moved into a folder (SHINE_ETC_DIR, SHINE_BIN_DIR) and
//!   the binary's URL a file:// one; then the systemd unit's ExecStart with its
//!   Environment= lines and the EnvironmentFile the script wrote.
//! - a Kubernetes pod: the worker Deployment's command and env (ConfigMap and Secret
//!   resolved) on top of the image's ENV, from the manifests launch-script prints.
//! - a container: the image's ENV and ENTRYPOINT with `docker run -e SHINE_MANAGER -e
//!   SHINE_TOKEN`.
//!
//! The machines are `fleet/machines.rs`; absolute paths in their settings (the spool)
//! are moved under each machine's folder, the only change made to them. The manager
//! serves in this test's process (`common::Manager`).
//!
//! Also: `systemd-analyze verify` on the unit and `cloud-init schema` on the cloud-init
//! files (Debian packages `systemd` and `cloud-init`; SHINE_SKIP_SYSTEMD_VERIFY=1 or
//! SHINE_SKIP_CLOUD_INIT_SCHEMA=1 skip a check where they cannot be installed).

mod common;
#[path = "fleet/containerfile.rs"]
mod containerfile;
#[path = "fleet/image.rs"]
mod image;
#[path = "fleet/machines.rs"]
mod machines;

use common::{config, metric, Manager, HANG};
use containerfile::{image_config, parse_containerfile};
use image::worker_image;
use machines::{container_worker, heredoc, launch_script, pod_worker, vm_worker, Worker};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const MANAGER_BIN: &str = env!("CARGO_BIN_EXE_shine-manager");
const CONTAINERFILE: &str = "configs/container/Containerfile.worker";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(workspace().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `abs` (an absolute path inside a machine or image) under the folder standing in for
/// that machine's root.
fn on(root: &Path, abs: &str) -> PathBuf {
    assert!(abs.starts_with('/'), "{abs:?} is not an absolute path");
    root.join(abs.trim_start_matches('/'))
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------------
// The manager's view.

async fn workers(m: &Manager) -> Vec<Value> {
    m.get_json("/api/v1/workers").await["workers"].as_array().unwrap().clone()
}

fn by_id(list: &[Value], id: u64) -> Option<&Value> {
    list.iter().find(|w| w["worker_id"] == id)
}

/// Poll GET /api/v1/workers until `ok` holds (or panic after [`HANG`]); the last list.
async fn wait_workers(m: &Manager, what: &str, procs: &[&Worker], ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + HANG;
    loop {
        let list = workers(m).await;
        if ok(&list) {
            return list;
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = procs.iter().map(|p| format!("--- {} ---\n{}", p.what, tail(&p.log(), 15))).collect();
            panic!("timed out waiting for {what}; workers: {}\n{}", serde_json::to_string_pretty(&list).unwrap(), logs.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Start `w` and wait for it to register and be listed live: its worker id (the one
/// new in the list). (Live: heard from within 2.5 heartbeats, which a loaded machine
/// may miss for a moment, so that is waited for too rather than read once.)
async fn start_and_register(m: &Manager, w: &mut Worker) -> u64 {
    let before: Vec<u64> = workers(m).await.iter().map(|w| w["worker_id"].as_u64().unwrap()).collect();
    w.start();
    let what = format!("{} to register", w.what);
    let is_new = |x: &Value| !before.contains(&x["worker_id"].as_u64().unwrap());
    let list = wait_workers(m, &what, &[w], |l| l.iter().any(|x| is_new(x) && x["state"] == "live")).await;
    let new = list.iter().find(|x| is_new(x)).unwrap();
    assert_eq!(new["state"], "live", "{new}");
    assert_eq!(new["backend"], "sim");
    new["worker_id"].as_u64().unwrap()
}

// ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_launched_from_the_fleet_files_register_heartbeat_and_are_dropped_when_killed() {
    let image = tokio::task::spawn_blocking(worker_image).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir.path().join("data"));
    // Fast cadence so that liveness shows within seconds: heartbeats every 0.5 s (told
    // to the workers at registration), gone after 30 s of silence: the killed worker's
    // wait, and so long that no live worker at the lowest priority on a loaded 2-core
    // machine (held up for seconds at a time) reaches it.
    cfg.workers.heartbeat_secs = 0.5;
    cfg.workers.worker_timeout_secs = 30.0;
    cfg.workers.model_poll_secs = 1.0;
    cfg.workers.upload_every_secs = 1.0;
    // A learner that barely trains: this test is about the fleet, and on a small
    // machine the workers' games need the CPU (a busy trainer here stalled the API).
    cfg.trainer.samples_per_insert = 1e-4;
    let m = Manager::start(cfg).await;

    // These run launch-script and cloud-init's setup script: blocking work, off the
    // runtime that serves the manager.
    let (path, url) = (dir.path().to_path_buf(), m.url.clone());
    let (mut vm, mut pod, mut ctr) =
        tokio::task::spawn_blocking(move || (vm_worker(&path, &url, image), pod_worker(&path, &url, image), container_worker(&path, &url, image)))
            .await
            .unwrap();
    // One at a time, so each new id in the list is that worker's.
    let vm_id = start_and_register(&m, &mut vm).await;
    let pod_id = start_and_register(&m, &mut pod).await;
    let ctr_id = start_and_register(&m, &mut ctr).await;
    let ids = [vm_id, pod_id, ctr_id];

    // Heartbeating: every worker's reported frame count keeps growing, and all are live.
    let first = wait_workers(&m, "a heartbeat with frames from each worker", &[&vm, &pod, &ctr], |l| {
        ids.iter().all(|&id| by_id(l, id).is_some_and(|w| w["frames"].as_u64().unwrap_or(0) > 0))
    })
    .await;
    let frames = |l: &[Value], id| by_id(l, id).unwrap()["frames"].as_u64().unwrap();
    let list = wait_workers(&m, "newer heartbeats from each worker", &[&vm, &pod, &ctr], |l| {
        ids.iter().all(|&id| by_id(l, id).is_some_and(|w| w["state"] == "live" && w["frames"].as_u64().unwrap_or(0) > frames(&first, id)))
    })
    .await;
    assert_eq!(list.len(), 3, "{list:?}");
    assert_eq!(by_id(&list, pod_id).unwrap()["envs"], 2, "the pod plays SHINE_ENVS from the ConfigMap");
    let mut slots: Vec<u64> = list.iter().map(|w| w["slot"].as_u64().unwrap()).collect();
    slots.sort();
    assert_eq!(slots, [0, 1, 2], "one epsilon-ladder slot each");
    assert_eq!(metric(&m.metrics().await, "shine_workers{run=\"default\"}"), Some(3.0), "/metrics shows the fleet size");

    // A machine vanishes (SIGKILL: no goodbye): after the timeout the manager lists its
    // worker as gone, keeps the others, and counts 2.
    let ctr_slot = by_id(&list, ctr_id).unwrap()["slot"].as_u64().unwrap();
    ctr.signal("KILL");
    ctr.wait(HANG).await;
    let list = wait_workers(&m, "the killed worker to be marked gone", &[&vm, &pod, &ctr], |l| by_id(l, ctr_id).is_some_and(|w| w["state"] == "gone")).await;
    for id in [vm_id, pod_id] {
        assert_ne!(by_id(&list, id).unwrap()["state"], "gone", "only the killed worker is gone: {list:?}");
    }
    let deadline = Instant::now() + HANG;
    while metric(&m.metrics().await, "shine_workers{run=\"default\"}") != Some(2.0) {
        assert!(Instant::now() < deadline, "shine_workers did not drop to 2:\n{}", m.metrics().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(m.current().await["workers"], 2, "the stats count 2 live workers");

    // Restarted (Restart=always, a pod's restart, docker --restart): a new id, and the
    // freed ladder slot.
    let again = start_and_register(&m, &mut ctr).await;
    assert_ne!(again, ctr_id, "a gone worker comes back under a new id");
    let list = workers(&m).await;
    assert_eq!(by_id(&list, again).unwrap()["slot"].as_u64(), Some(ctr_slot), "the gone worker's slot is reused: {list:?}");

    // Stopping (systemctl stop, pod deletion, docker stop: SIGTERM) ends each cleanly,
    // by itself. (That its own limits on a stop fit in the unit's TimeoutStopSec, after
    // which systemd would kill it, is checked against the numbers, not this machine's
    // speed: worker/src/run/mod.rs, a_stop_fits_in_the_units_stop_timeout.)
    for w in [&mut vm, &mut pod, &mut ctr] {
        w.signal("TERM");
        let status = w.wait(HANG).await;
        assert!(status.success(), "{} exited with {status} after SIGTERM:\n{}", w.what, tail(&w.log(), 30));
    }
    m.stop().await.unwrap();
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    if std::env::var_os("SHINE_SKIP_SYSTEMD_VERIFY").is_some_and(|v| v == "1") {
        eprintln!("SHINE_SKIP_SYSTEMD_VERIFY=1: not checking the unit");
        return;
    }
    let tool = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        tool.is_ok_and(|o| o.status.success()),
        "systemd-analyze not found: install Debian's `systemd` package (it checks configs/systemd/shine-worker.service), or set SHINE_SKIP_SYSTEMD_VERIFY=1"
    );
    // verify insists that ExecStart's binary exists and is executable, and runs nothing:
    // in a copy of the unit it points at this test's own executable; nothing else
    // changes. (It pointed at the worker image's binary once, and waited up to 85 s for
    // the other fleet test's build of it.)
    let binary = std::env::current_exe().unwrap();
    let unit = read("configs/systemd/shine-worker.service");
    let exec = "ExecStart=/usr/local/bin/shine-worker run";
    assert_eq!(unit.matches(exec).count(), 1, "the unit runs {exec}");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("shine-worker.service");
    std::fs::write(&copy, unit.replace(exec, &format!("ExecStart={} run", binary.display()))).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&copy).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // verify exits 0 on settings it ignores (a typo, a bad value) but names the file or
    // the unit in a warning: any such line fails the test.
    let complaints: Vec<&str> = text.lines().filter(|l| l.contains("shine-worker.service")).collect();
    assert!(out.status.success() && complaints.is_empty(), "systemd-analyze verify ({}):\n{text}", out.status);
}

#[test]
fn the_cloud_init_files_pass_cloud_inits_schema_check() {
    if std::env::var_os("SHINE_SKIP_CLOUD_INIT_SCHEMA").is_some_and(|v| v == "1") {
        eprintln!("SHINE_SKIP_CLOUD_INIT_SCHEMA=1: not checking the cloud-init files");
        return;
    }
    let tool = Command::new("cloud-init").arg("--version").output();
    assert!(tool.is_ok_and(|o| o.status.success()), "cloud-init not found: install Debian's `cloud-init` package (its schema check validates configs/cloud-init/worker.yaml), or set SHINE_SKIP_CLOUD_INIT_SCHEMA=1");
    let dir = tempfile::tempdir().unwrap();
    // The committed file (GCP uses it as it is) and the AWS user-data with values filled in.
    let script = launch_script(&[
        "--cloud",
        "aws",
        "--workers",
        "2",
        "--manager-url",
        "https://manager.example.com:8443",
        "--token",
        "t0k-en",
        "--worker-url",
        "https://example.com/shine-worker",
    ]);
    let filled = dir.path().join("user-data.yaml");
    std::fs::write(&filled, heredoc(&script, "cat > shine-worker-user-data.yaml")).unwrap();
    for file in [workspace().join("configs/cloud-init/worker.yaml"), filled] {
        let out = Command::new("cloud-init").args(["schema", "--config-file"]).arg(&file).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("Valid cloud-config"), "cloud-init schema {}:\n{text}", file.display());
    }
}

#[test]
fn the_launch_script_command_leaves_the_service_flags_alone() {
    // `shine-manager --config X --listen Y` still means the service.
    let out = Command::new(MANAGER_BIN)
        .arg("--config")
        .arg(workspace().join("configs/manager.toml"))
        .args(["--listen", "127.0.0.1:9999", "--token", "t", "--print-config"])
        .env_remove("SHINE_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("listen = \"127.0.0.1:9999\""));
    // And launch-script's mistakes are explained.
    let out = Command::new(MANAGER_BIN)
        .args(["launch-script", "--cloud", "gcp", "--workers", "2", "--token", "t", "--manager-url", "http://m:8080"])
        .env_remove("SHINE_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--worker-url") && err.contains("build-worker.sh"), "{err}");
    let out = Command::new(MANAGER_BIN).args(["launch-script", "--cloud", "k8s", "--workers", "0", "--token", "t"]).env_remove("SHINE_TOKEN").output().unwrap();
    assert!(!out.status.success(), "0 workers is refused");
}

#[test]
fn the_build_script_is_what_the_containerfile_runs() {
    // The image and the docs build the worker with one script: the Containerfile's only
    // RUN in its build stage runs it.
    let stages = parse_containerfile(&read(CONTAINERFILE));
    let build = stages.iter().find(|s| s.name.as_deref() == Some("build")).unwrap();
    let runs: Vec<&str> = build.steps.iter().filter(|(i, _)| i == "RUN").map(|(_, a)| a.as_str()).collect();
    assert_eq!(runs, ["scripts/build-worker.sh \"$PREFIX\""]);
    let dolphin = stages.iter().find(|s| s.name.as_deref() == Some("worker-dolphin")).expect("a worker-dolphin target");
    assert!(dolphin.steps.iter().any(|(i, a)| i == "RUN" && a.contains("dolphin-emu")), "the dolphin target installs Debian's dolphin-emu");
    assert_eq!(image_config(&stages, dolphin).env.iter().rev().find(|(k, _)| k == "SHINE_BACKEND").map(|(_, v)| v.as_str()), Some("dolphin"));
    let worker = image_config(&stages, stages.last().unwrap());
    assert_eq!(worker.entrypoint, ["shine-worker", "run"]);
    assert!(worker.env.contains(&("SHINE_BACKEND".into(), "sim".into())));
}
