//! The binary as an operator meets it: --help, the token requirement, the listen URL,
//! and a clean exit with a final checkpoint on SIGTERM.

mod common;

use common::HANG;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shine-manager");

fn manager() -> Command {
    let mut c = Command::new(BIN);
    for v in ["SHINE_TOKEN", "SHINE_CONFIG", "SHINE_LISTEN", "SHINE_DATA_DIR", "SHINE_DEVICE"] {
        c.env_remove(v);
    }
    c
}

/// A manager on 127.0.0.1:0 with token "t", logging warnings only; its `host:port`
/// once it says it listens.
fn serving(data_dir: &std::path::Path) -> (Child, String) {
    let (child, addr, _) = serving_logging(data_dir, "warn");
    (child, addr)
}

/// [`serving`] with `log` as its RUST_LOG (nothing below warn before the address line,
/// which must come first), and the rest of its stdout: its log.
fn serving_logging(data_dir: &std::path::Path, log: &str) -> (Child, String, BufReader<ChildStdout>) {
    let mut child = manager()
        .args(["--listen", "127.0.0.1:0", "--device", "cpu", "--data-dir"])
        .arg(data_dir)
        .env("SHINE_TOKEN", "t")
        .env("RUST_LOG", log)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("shine-manager listening on http://").unwrap_or_else(|| panic!("{line:?}")).to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{line:?}");
    (child, addr, out)
}

#[test]
fn help_explains_the_flags() {
    let out = manager().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for s in ["--config", "--listen", "--data-dir", "--token", "--device", "--insecure-no-token", "SHINE_TOKEN", "SIGTERM"] {
        assert!(help.contains(s), "--help does not mention {s}:\n{help}");
    }
}

#[test]
fn refuses_to_start_without_a_token_and_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let out = manager().args(["--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to start without a token") && err.contains("--insecure-no-token"), "{err}");
}

#[test]
fn print_config_hides_the_token_and_applies_flags() {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/manager.toml");
    let out = manager().arg("--config").arg(&config).args(["--token", "s3cret", "--listen", "127.0.0.1:9999", "--print-config"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("listen = \"127.0.0.1:9999\""), "{text}");
    assert!(!text.contains("s3cret"), "the token must not be printed:\n{text}");
}

#[test]
fn sigterm_stops_cleanly_with_a_final_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _) = serving(dir.path());
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + HANG;
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0));
    assert!(shine_manager::storage::checkpoint::path(&dir.path().join("runs/default")).exists(), "final checkpoint written");
}

#[test]
fn a_query_token_never_reaches_the_log_even_at_debug_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = manager()
        .args(["--listen", "127.0.0.1:0", "--device", "cpu", "--data-dir"])
        .arg(dir.path())
        .env("SHINE_TOKEN", "the-secret-token-42")
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The log (stdout, after the address line, and stderr) read to the end by threads,
    // so that a full pipe never blocks the manager.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut before = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the manager exited:\n{before}");
        if let Some(url) = line.trim().strip_prefix("shine-manager listening on ") {
            break url.to_string();
        }
        before.push_str(&line);
    };
    tx.send(before).unwrap();
    let readers: Vec<_> = [Box::new(out) as Box<dyn std::io::Read + Send>, Box::new(child.stderr.take().unwrap())]
        .into_iter()
        .map(|mut r| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                r.read_to_string(&mut s).unwrap();
                tx.send(s).unwrap();
            })
        })
        .collect();
    for path in ["/api/v1/stats?token=the-secret-token-42", "/api/v1/models?x=1&token=the-secret-token-42", "/?TOKEN=the-secret-token-42"] {
        let r = reqwest::blocking::get(format!("{url}{path}")).unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    child.wait().unwrap();
    drop(tx);
    for r in readers {
        r.join().unwrap();
    }
    let text: String = rx.iter().collect();
    assert!(text.contains("token=REDACTED"), "the request span is logged at debug level:\n{}", &text[..text.len().min(3000)]);
    assert!(!text.contains("the-secret-token-42"), "the token leaked into the log");
    assert!(!text.contains('\u{1b}'), "no colour codes in a log written to a pipe");
}

#[test]
fn a_second_signal_quits_at_once_while_a_graceful_stop_waits() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    // The trace layer's line for each request it takes ("started processing request").
    let (mut child, addr, log) = serving_logging(dir.path(), "warn,tower_http=debug");
    // The log read to the end by a thread (a full pipe must never block the manager).
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in log.lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    // An upload whose body never finishes: a graceful stop waits for it.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        slow,
        "POST /api/v1/experience HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\nSHXP"
    )
    .unwrap();
    slow.flush().unwrap();
    // In flight once the manager has taken it (its log says so), however long that takes.
    let deadline = Instant::now() + HANG;
    loop {
        let line = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("the manager logs the upload it takes");
        if line.contains("started processing request") {
            break;
        }
    }
    let pid = child.id().to_string();
    let kill = |sig: &str| assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    kill("-TERM");
    // A while for an early exit to show (weaker on a slow machine, never wrong).
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the first signal waits for the request in flight");
    let t = Instant::now();
    kill("-TERM");
    // The exit code tells the second signal's quit (130) from a graceful stop (0); the
    // limit is only for a hang.
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < HANG, "no exit after the second signal");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exit.code(), Some(130), "the second signal quits at once");
    drop(slow);
    reader.join().unwrap();
}
