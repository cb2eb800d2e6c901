//! The process test kit: what the workspace's tests that start real processes (the
//! manager, the worker, the Dolphin peer) share, so that each is written once.
//!
//! - [`HANG`]: the one limit of every wait for something that must happen.
//! - [`free_port`]; [`Proc`] and [`spawn`] (a child with its log, signals, a bounded
//!   wait for its exit, killed when dropped); [`wait_for`] (poll until a condition
//!   holds, with the process's log in the failure).
//! - [`http`], [`healthy`]: a plain HTTP/1.0 request over loopback, no client library
//!   (a test of the worker must not pull the manager's HTTP stack).
//! - [`metric`]: the value of one series in Prometheus text, the one parser of
//!   `/metrics` the tests and benchmarks use.
//! - [`manager`]: `shine-manager` as a process, started from one of the test configs
//!   in `testkit/configs/` with `--listen`, `--data-dir` and `--token`, waited for until
//!   it answers; the one way a test starts a manager process.
//!
//! A dev-dependency only: nothing here is built into a binary.

#![deny(unsafe_code)]

pub mod manager;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The limit of every wait for something that must happen (a process up, a count
/// reached, a message arriving, an exit): long enough that only a hang reaches it, on
/// any machine (a loaded 2-core VM running debug builds, two test binaries side by
/// side). A wait ends on its event, so the limit costs nothing when all is well.
pub const HANG: Duration = Duration::from_secs(600);

/// A TCP port free on 127.0.0.1 now (the OS's choice).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child process and the file its output goes to.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// What it has written so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Send it `sig` (`TERM`, `INT`, `KILL`, ...).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().unwrap().success();
        assert!(ok, "kill -{sig} failed");
    }

    /// Wait for it to exit; its exit status. Killed, and the test failed with its log,
    /// when it has not exited `within`.
    pub fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
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

/// Start `cmd` with its stdout and stderr in `log`, and `RUST_LOG=info` unless `cmd`
/// sets a `RUST_LOG` of its own.
pub fn spawn(cmd: &mut Command, log: PathBuf) -> Proc {
    let file = std::fs::File::create(&log).unwrap();
    if !cmd.get_envs().any(|(k, _)| k == "RUST_LOG") {
        cmd.env("RUST_LOG", "info");
    }
    let child = cmd.stdout(Stdio::from(file.try_clone().unwrap())).stderr(Stdio::from(file)).spawn().unwrap();
    Proc { child, log }
}

/// Poll `ok` every 200 ms until it holds; fails the test with `p`'s log after `within`.
pub fn wait_for(within: Duration, what: &str, mut ok: impl FnMut() -> bool, p: &Proc) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}; log:\n{}", p.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `method path` as HTTP/1.0 to 127.0.0.1:`port`, without a body, with `token` as a
/// bearer token if given: the whole response (status line, headers, body), or `None`
/// when nothing answered.
pub fn http(port: u16, method: &str, path: &str, token: Option<&str>) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    // Only against a hang: an answer a loaded machine is slow to give still comes.
    s.set_read_timeout(Some(HANG)).ok()?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    s.write_all(format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n{auth}Content-Length: 0\r\n\r\n").as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    Some(out)
}

/// Whether the manager on `port` answers `GET /healthz` with 200 `ok`.
pub fn healthy(port: u16) -> bool {
    http(port, "GET", "/healthz", None).is_some_and(|r| {
        let r = String::from_utf8_lossy(&r);
        (r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200")) && r.split_once("\r\n\r\n").is_some_and(|(_, body)| body.trim() == "ok")
    })
}

/// The value of `series` in Prometheus text: the line `series value`, where `series` is
/// a name (`shine_train_steps_total`) or a name with its labels as rendered
/// (`shine_train_steps_total{run="default"}`).
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_reads_one_series_and_not_its_neighbours() {
        let text = "# TYPE a counter\na 1\na_total 2\na{run=\"x\"} 3\na{run=\"xy\"} 4\nb 5.5\n";
        assert_eq!(metric(text, "a"), Some(1.0));
        assert_eq!(metric(text, "a_total"), Some(2.0));
        assert_eq!(metric(text, "a{run=\"x\"}"), Some(3.0));
        assert_eq!(metric(text, "b"), Some(5.5));
        assert_eq!(metric(text, "c"), None);
    }

    #[test]
    fn http_and_healthy_talk_to_a_real_listener() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for body in ["ok", "not ok"] {
                let (mut s, _) = listener.accept().unwrap();
                // The request, to its blank line.
                let mut req = Vec::new();
                let mut byte = [0u8; 1];
                while !req.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap() == 1 {
                    req.push(byte[0]);
                }
                assert!(String::from_utf8_lossy(&req).starts_with("GET /healthz HTTP/1.0\r\n"));
                write!(s, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
            }
        });
        assert!(healthy(port));
        assert!(!healthy(port), "a 200 that is not `ok` is not healthy");
        server.join().unwrap();
        assert!(!healthy(free_port()), "nothing listening");
    }
}
