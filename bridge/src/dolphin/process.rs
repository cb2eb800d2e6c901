//! Finding the Dolphin executable, launching it headless with its log captured, and
//! noticing when it dies.

use super::{Display, DolphinError};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

/// The executable Shine runs: Dolphin without a GUI (docs/melee-reference.md, section 5).
pub const EXECUTABLE: &str = "dolphin-emu-nogui";
/// Where distributions put it when it is not on `PATH` (Debian: /usr/games).
const EXTRA_DIRS: [&str; 2] = ["/usr/games", "/usr/local/games"];
/// What to tell a user without Dolphin.
pub const INSTALL_HINT: &str = "install Dolphin (Debian/Ubuntu: `sudo apt-get install dolphin-emu`, which provides /usr/games/dolphin-emu-nogui), or pass the path of a dolphin-emu-nogui build with --dolphin PATH";

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The executable to run: `explicit` when given (it must exist), else
/// `dolphin-emu-nogui` on `PATH` or in /usr/games.
pub fn find_executable(explicit: Option<&Path>) -> Result<PathBuf, DolphinError> {
    if let Some(p) = explicit {
        return if is_executable(p) { Ok(p.to_path_buf()) } else { Err(DolphinError::NotInstalled { searched: vec![p.to_path_buf()] }) };
    }
    let path_dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    let searched: Vec<PathBuf> = path_dirs.into_iter().chain(EXTRA_DIRS.iter().map(PathBuf::from)).map(|d| d.join(EXECUTABLE)).collect();
    searched.iter().find(|p| is_executable(p)).cloned().ok_or(DolphinError::NotInstalled { searched })
}

/// `dolphin-emu-nogui --version`'s first line, e.g. "Dolphin 5.0-17995-g8bad821019".
pub fn version(exe: &Path) -> Result<String, DolphinError> {
    let out = Command::new(exe).arg("--version").stdin(Stdio::null()).output().map_err(|source| DolphinError::Spawn { exe: exe.to_path_buf(), source })?;
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Ok(text.lines().find(|l| !l.trim().is_empty()).unwrap_or("unknown version").trim().to_string())
}

/// A running Dolphin; killed when dropped, so a worker never leaks emulators.
pub struct DolphinProcess {
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
}

impl DolphinProcess {
    /// `exe -p headless -v Null -u <user_dir> -e <image>` (or `-p x11 -v OGL` for a
    /// window), stdout and stderr to `log`.
    pub fn spawn(exe: &Path, user_dir: &Path, image: &Path, log: &Path, display: Display, extra_args: &[String]) -> Result<DolphinProcess, DolphinError> {
        let log_file = std::fs::File::create(log).map_err(|source| DolphinError::UserDir { path: log.to_path_buf(), what: "creating the log", source })?;
        let log_err = log_file.try_clone().map_err(|source| DolphinError::UserDir { path: log.to_path_buf(), what: "creating the log", source })?;
        let child = Command::new(exe)
            .args(display.args())
            .arg("-u")
            .arg(user_dir)
            .arg("-e")
            .arg(image)
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|source| DolphinError::Spawn { exe: exe.to_path_buf(), source })?;
        Ok(DolphinProcess { child, log: log.to_path_buf(), exited: None })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the process has exited (checked without blocking).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// The last `lines` lines of Dolphin's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Kill and reap (idempotent).
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
    }
}

impl Drop for DolphinProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_path_that_does_not_exist_is_not_installed() {
        let err = find_executable(Some(Path::new("/nonexistent/dolphin-emu-nogui"))).unwrap_err();
        assert!(matches!(&err, DolphinError::NotInstalled { searched } if searched == &[PathBuf::from("/nonexistent/dolphin-emu-nogui")]));
        let msg = err.to_string();
        assert!(msg.contains("apt-get install dolphin-emu") && msg.contains("--dolphin"), "{msg}");
        // A file that exists but is not executable is refused too.
        let f = tempfile::NamedTempFile::new().unwrap();
        assert!(find_executable(Some(f.path())).is_err());
    }

    #[test]
    fn log_is_captured_and_exit_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-dolphin");
        std::fs::write(&script, "#!/bin/sh\necho \"args: $*\"\necho oops >&2\nexit 3\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.path().join("log");
        // The script exits at once; each wait's limit is only for a hang.
        let wait_exit = |p: &mut DolphinProcess| {
            let t = std::time::Instant::now();
            while p.exited().is_none() && t.elapsed().as_secs() < 600 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        let mut p = DolphinProcess::spawn(&script, dir.path(), Path::new("game.iso"), &log, Display::Headless, &[]).unwrap();
        wait_exit(&mut p);
        assert_eq!(p.exited().and_then(|s| s.code()), Some(3));
        let tail = p.log_tail(10);
        assert!(tail.contains(&format!("args: -p headless -v Null -u {} -e game.iso", dir.path().display())), "{tail}");
        assert!(tail.contains("oops"), "stderr is captured too: {tail}");
        // For a person to play: a window with OpenGL video.
        let mut p = DolphinProcess::spawn(&script, dir.path(), Path::new("game.iso"), &log, Display::Window, &[]).unwrap();
        wait_exit(&mut p);
        assert!(p.log_tail(10).contains("args: -p x11 -v OGL -u "), "{}", p.log_tail(10));
    }
}
