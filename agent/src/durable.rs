//! Files that must survive a crash, and the wall clock: small pieces both binaries
//! need (checkpoints, models, the registry index, the worker's spool and stats file).
//! They live here because `agent` is the one crate the two binaries share.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What [`write_atomic`] appends to a file's name while writing it. A file with this
/// ending is a write that crashed before its rename: never a complete file.
pub const TMP_SUFFIX: &str = ".tmp";

/// The temporary name [`write_atomic`] writes `path` under.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(TMP_SUFFIX);
    PathBuf::from(name)
}

/// Write `bytes` to `path` so that a reader, or the next start after a crash or power
/// loss, finds either the old file or the whole new one: written to
/// [`tmp_path`]`(path)`, fsynced, renamed over `path` (atomic within a directory on
/// POSIX), then the directory fsynced so the rename itself is on disk.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    // The data is on disk before the rename makes it visible.
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    sync_parent(path);
    Ok(())
}

/// Rename `from` to `to` (a file or a directory) and fsync both parent directories, so
/// that after a crash or power loss the entry is in one place, not in both or neither.
pub fn rename(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::rename(from, to)?;
    sync_parent(to);
    if from.parent() != to.parent() {
        sync_parent(from);
    }
    Ok(())
}

/// Fsync the directory holding `path`, which makes a rename or a new entry there
/// durable. Best effort: not every filesystem lets a directory be opened and synced,
/// and the data itself is already safe.
fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
}

/// Seconds since the Unix epoch (0 on a clock set before 1970).
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_moves_a_directory_between_parents() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("runs").join("a");
        std::fs::create_dir_all(&from).unwrap();
        std::fs::write(from.join("f"), b"x").unwrap();
        let to = dir.path().join("deleted").join("a-1");
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        rename(&from, &to).unwrap();
        assert!(!from.exists());
        assert_eq!(std::fs::read(to.join("f")).unwrap(), b"x");
        assert!(rename(&from, &to).is_err(), "a missing source is an error");
    }

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second, longer");
        assert!(!tmp_path(&path).exists());
        assert_eq!(tmp_path(&path).file_name().unwrap(), "state.json.tmp");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"kept").unwrap();
        // The temporary name is taken by a directory: the write fails before the rename.
        std::fs::create_dir(tmp_path(&path)).unwrap();
        assert!(write_atomic(&path, b"lost").is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"kept");
    }

    #[test]
    fn the_clock_is_unix_time() {
        // 2020-01-01 and 2100-01-01: a wrong epoch or unit lands far outside.
        assert!((1.5778368e9..4.1024448e9).contains(&unix_now()));
    }
}
