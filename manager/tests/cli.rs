//! The binary as an operator meets it: --help, the token requirement, the listen URL,
//! and a clean exit with a final checkpoint on SIGTERM.

use std::io::{BufRead, BufReader};
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
    let mut child = manager()
        .args(["--listen", "127.0.0.1:0", "--device", "cpu", "--data-dir"])
        .arg(dir.path())
        .env("SHINE_TOKEN", "t")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("shine-manager listening on http://127.0.0.1:"), "{line:?}");
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
    assert!(shine_manager::checkpoint::path(dir.path()).exists(), "final checkpoint written");
}
