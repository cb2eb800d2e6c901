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
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: not every filesystem lets a directory be opened and synced, and
        // the data itself is already safe.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// Seconds since the Unix epoch (0 on a clock set before 1970).
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

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
