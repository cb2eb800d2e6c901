//! The binary as an operator meets it: --help, the token requirement, the listen URL,
//! and a clean exit with a final checkpoint on SIGTERM.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
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
fn serving(data_dir: &std::path::Path) -> (std::process::Child, String) {
    let mut child = manager()
        .args(["--listen", "127.0.0.1:0", "--device", "cpu", "--data-dir"])
        .arg(data_dir)
        .env("SHINE_TOKEN", "t")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("shine-manager listening on http://").unwrap_or_else(|| panic!("{line:?}")).to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{line:?}");
    (child, addr)
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
    let deadline = Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0));
    assert!(shine_manager::checkpoint::path(&dir.path().join("runs/default")).exists(), "final checkpoint written");
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
    let (mut child, addr) = serving(dir.path());
    // An upload whose body never finishes: a graceful stop waits for it.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        slow,
        "POST /api/v1/experience HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\nSHXP"
    )
    .unwrap();
    slow.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    let kill = |sig: &str| assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    kill("-TERM");
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the first signal waits for the request in flight");
    let t = Instant::now();
    kill("-TERM");
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no exit after the second signal");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exit.code(), Some(130), "the second signal quits at once");
    drop(slow);
}
