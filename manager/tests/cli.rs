//! The binary as an operator meets it: --help, the token requirement, the listen URL,
//! and a clean exit with a final checkpoint on SIGTERM.

use shine_testkit::manager::config;
use shine_testkit::{wait_for, Proc, HANG};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_shine-manager");

fn manager() -> Command {
    let mut c = Command::new(BIN);
    for v in ["SHINE_TOKEN", "SHINE_CONFIG", "SHINE_LISTEN", "SHINE_DATA_DIR", "SHINE_DEVICE"] {
        c.env_remove(v);
    }
    c
}

/// A manager serving the test config `small.toml` with `token` and `log` as its
/// RUST_LOG, its data in `dir/data`, its output in `dir/manager.log`; with its
/// `host:port`.
fn serving(dir: &std::path::Path, token: &str, log: &str) -> (Proc, String) {
    let m = shine_testkit::manager::Manager::new(BIN, "small.toml", dir, token);
    let mut cmd = m.command();
    cmd.env("RUST_LOG", log);
    let p = m.start_command(cmd);
    (p, format!("127.0.0.1:{}", m.port))
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
fn check_config_says_whether_the_config_is_valid_and_starts_nothing() {
    // What scripts/sweep.sh checks a grid with before it starts anything.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let check =
        |file: &str| manager().arg("--config").arg(config(file)).arg("--data-dir").arg(&data).args(["--token", "t", "--check-config"]).output().unwrap();
    let ok = check("runs-grid.toml");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "the configuration is valid");
    let cases = [
        ("run-unknown-key.toml", "a", "lrr"),
        ("run-gamma-out-of-range.toml", "b", "gamma"),
        ("run-fleet-setting.toml", "c", "[workers] heartbeat_secs is the fleet's"),
        ("run-epsilon-out-of-range.toml", "d", "epsilon = 2"),
    ];
    for (file, run, says) in cases {
        let bad = check(&format!("invalid/{file}"));
        let err = String::from_utf8_lossy(&bad.stderr);
        assert_eq!(bad.status.code(), Some(1), "{file}: {err}");
        assert!(err.contains(says) && err.contains(&format!("run {run:?}")), "{file}: {err}");
    }
    // Every invalid test config is one of these cases.
    let mut files: Vec<String> = std::fs::read_dir(config("invalid")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    let mut named: Vec<&str> = cases.iter().map(|c| c.0).collect();
    named.sort();
    assert_eq!(files, named, "testkit/configs/invalid/ holds exactly the cases of this test");
    assert!(!data.exists(), "a check writes nothing");
}

#[test]
fn sigterm_stops_cleanly_with_a_final_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut p, addr) = serving(dir.path(), "t", "warn");
    // Nothing below warn comes before it: the address is the first line an operator sees.
    assert!(p.log().starts_with(&format!("shine-manager listening on http://{addr}\n")), "{}", p.log());
    p.signal("TERM");
    assert_eq!(p.wait(HANG).code(), Some(0));
    assert!(shine_manager::storage::checkpoint::path(&data.join("runs/default")).exists(), "final checkpoint written");
}

#[test]
fn a_query_token_never_reaches_the_log_even_at_debug_level() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, addr) = serving(dir.path(), "the-secret-token-42", "debug");
    for path in ["/api/v1/stats?token=the-secret-token-42", "/api/v1/models?x=1&token=the-secret-token-42", "/?TOKEN=the-secret-token-42"] {
        let r = reqwest::blocking::get(format!("http://{addr}{path}")).unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    p.signal("TERM");
    p.wait(HANG);
    let text = p.log();
    assert!(text.contains("token=REDACTED"), "the request span is logged at debug level:\n{}", &text[..text.len().min(3000)]);
    assert!(!text.contains("the-secret-token-42"), "the token leaked into the log");
    assert!(!text.contains('\u{1b}'), "no colour codes in a log written to a file");
}

#[test]
fn a_second_signal_quits_at_once_while_a_graceful_stop_waits() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    // The trace layer's line for each request it takes ("started processing request").
    let (mut p, addr) = serving(dir.path(), "t", "warn,tower_http=debug");
    let taken = |log: &str| log.matches("started processing request").count();
    let before = taken(&p.log());
    // An upload whose body never finishes: a graceful stop waits for it.
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        slow,
        "POST /api/v1/experience HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\nSHXP"
    )
    .unwrap();
    slow.flush().unwrap();
    // In flight once the manager has taken it (its log says so: one line more than the
    // fixture's /healthz requests, all answered before it returned), however long that
    // takes.
    wait_for(HANG, "the manager to log the upload it takes", || taken(&p.log()) > before, &p);
    p.signal("TERM");
    // A while for an early exit to show (weaker on a slow machine, never wrong).
    std::thread::sleep(Duration::from_millis(500));
    assert!(p.child.try_wait().unwrap().is_none(), "the first signal waits for the request in flight");
    p.signal("TERM");
    // The exit code tells the second signal's quit (130) from a graceful stop (0); the
    // limit is only for a hang.
    assert_eq!(p.wait(HANG).code(), Some(130), "the second signal quits at once");
    drop(slow);
}
