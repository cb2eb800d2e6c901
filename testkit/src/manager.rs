//! `shine-manager` as a process, for every test that starts one (the manager's own
//! process tests and the worker's): the binary, one of the test configs in
//! `testkit/configs/`, and the few values a test sets itself passed as the manager's own
//! flags (`--listen`, `--data-dir`, `--token`), so that no test writes a config.
//!
//! The test configs are files the manager's config test parses and validates
//! (`manager/src/config.rs`, `the_test_configs_are_valid`): a key a config no longer
//! has fails there, not in a test that would only see the manager refuse to start.
//!
//! The binary is the caller's: the manager's tests have it from cargo
//! (`CARGO_BIN_EXE_shine-manager`); the worker's, built in a cargo run of their own so
//! that they never link libtorch, find it beside their executable ([`beside_tests`]).

use crate::{free_port, healthy, Proc, HANG};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A test config, `testkit/configs/<name>` (or a folder of them, such as `invalid`).
/// Panics, naming the folder, when there is no such file.
pub fn config(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs").join(name);
    assert!(path.exists(), "no test config {}: the test configs are the files in testkit/configs/", path.display());
    path
}

/// The `shine-manager` binary beside the running test's executable
/// (`target/<profile>/deps/<test>-<hash>` -> `target/<profile>/shine-manager`, whatever
/// `CARGO_TARGET_DIR` is), or `SHINE_MANAGER_BIN`. Panics, saying how to build it, when
/// it is missing.
pub fn beside_tests() -> PathBuf {
    let beside = || std::env::current_exe().unwrap().parent().and_then(Path::parent).unwrap().join("shine-manager");
    let path = std::env::var_os("SHINE_MANAGER_BIN").map(PathBuf::from).unwrap_or_else(beside);
    assert!(path.exists(), "{} does not exist: build it with `. scripts/env.sh && cargo build -p shine-manager` (or set SHINE_MANAGER_BIN)", path.display());
    path
}

/// How a test starts a manager: [`Manager::start`] starts it and waits until it answers.
/// Start it again (the same port, data directory and log) for a restart.
#[derive(Clone, Debug)]
pub struct Manager {
    pub bin: PathBuf,
    /// One of [`config`]'s files.
    pub config: PathBuf,
    /// It listens on `127.0.0.1:port` (`--listen`).
    pub port: u16,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--token`.
    pub token: String,
    /// Where its output goes, appended to across restarts.
    pub log: PathBuf,
}

impl Manager {
    /// `bin` with the test config `config_name` on a free port, its data in `dir/data`
    /// and its log `dir/manager.log`.
    pub fn new(bin: impl Into<PathBuf>, config_name: &str, dir: &Path, token: &str) -> Manager {
        Manager {
            bin: bin.into(),
            config: config(config_name),
            port: free_port(),
            data_dir: dir.join("data"),
            token: token.into(),
            log: dir.join("manager.log"),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The command that starts it, not started: for a test that changes how it starts
    /// (a resource limit, a log level), then [`Manager::start_command`]. Its output is
    /// appended to the log, `RUST_LOG` is `info` unless set on it later, and the
    /// `SHINE_*` variables the manager reads are removed, so that only the file and the
    /// flags say how it runs.
    pub fn command(&self) -> Command {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap_or_else(|e| panic!("opening {}: {e}", self.log.display()));
        let mut c = Command::new(&self.bin);
        for v in ["SHINE_CONFIG", "SHINE_LISTEN", "SHINE_DATA_DIR", "SHINE_TOKEN", "SHINE_DEVICE"] {
            c.env_remove(v);
        }
        c.arg("--config")
            .arg(&self.config)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--token")
            .arg(&self.token)
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log));
        c
    }

    /// Start it and wait until it answers `GET /healthz`; the test fails with its log
    /// when it exits first (or after [`HANG`]).
    pub fn start(&self) -> Proc {
        self.start_command(self.command())
    }

    /// [`Manager::start`] with `cmd`, [`Manager::command`] changed by the test.
    pub fn start_command(&self, mut cmd: Command) -> Proc {
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", self.bin.display()));
        let mut p = Proc { child, log: self.log.clone() };
        let deadline = Instant::now() + HANG;
        while !healthy(self.port) {
            if let Some(status) = p.child.try_wait().unwrap() {
                panic!("the manager exited ({status}) before it answered /healthz; log:\n{}", p.log());
            }
            assert!(Instant::now() < deadline, "the manager did not answer /healthz within {HANG:?}; log:\n{}", p.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    }
}
