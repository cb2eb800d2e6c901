//! Finding Dolphin's guest RAM (docs/melee-reference.md, section 3).
//!
//! Dolphin allocates guest memory as the POSIX shared-memory segment
//! `/dolphin-emu.<pid>` (older builds and Slippi Ishiiruka: `/dolphinmem.N`) and
//! unlinks it at once, so it cannot be opened by name. It is still open in Dolphin,
//! so `/proc/<pid>/fd/N` links to `/dev/shm/dolphin-emu.<pid> (deleted)`; opening
//! that link read-only and mapping MEM1 from offset 0 gives a live view of guest RAM.

use super::sys::MappedRam;
use super::DolphinError;
use crate::ram::addr;
use std::path::{Path, PathBuf};

/// A segment that looks like Dolphin's guest RAM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The `/proc/<pid>/fd/N` link to open.
    pub fd_link: PathBuf,
    /// What the link points at, e.g. `/dev/shm/dolphin-emu.1234 (deleted)`.
    pub target: String,
}

/// True for the names Dolphin gives its guest-memory segment.
pub fn is_guest_ram_name(target: &str) -> bool {
    let t = target.strip_suffix(" (deleted)").unwrap_or(target);
    let Some(name) = t.strip_prefix("/dev/shm/") else { return false };
    let rest = name.strip_prefix("dolphin-emu.").or_else(|| name.strip_prefix("dolphinmem").map(|r| r.strip_prefix('.').unwrap_or(r)));
    match rest {
        Some(rest) => !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()),
        None => false,
    }
}

/// Scan a `/proc/<pid>/fd` directory for the guest-RAM segment. `Ok(None)`: not (yet)
/// there. Errors: the directory cannot be listed (the process is gone, or /proc hides it).
pub fn scan_fd_dir(fd_dir: &Path) -> std::io::Result<Option<Segment>> {
    let mut found = None;
    for entry in std::fs::read_dir(fd_dir)? {
        let Ok(entry) = entry else { continue };
        // An fd can close between listing and reading the link: skip it.
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let target = target.to_string_lossy().into_owned();
        if is_guest_ram_name(&target) {
            // Prefer the current naming when both exist.
            let better = target.contains("dolphin-emu.") || found.is_none();
            if better {
                found = Some(Segment { fd_link: entry.path(), target });
            }
        }
    }
    Ok(found)
}

/// Turn a failure to open the segment into an error that says what to do.
pub fn open_error(path: &Path, err: std::io::Error) -> DolphinError {
    match err.kind() {
        std::io::ErrorKind::PermissionDenied => DolphinError::PermissionDenied { path: path.to_path_buf(), source: err },
        _ => DolphinError::MapRam { path: path.to_path_buf(), source: err },
    }
}

/// Open the segment read-only and map MEM1. `Ok(None)`: the segment is there but not
/// yet sized (Dolphin creates it, unlinks it, and only then truncates it to its full
/// length), so the caller should look again a moment later.
pub fn map_mem1(seg: &Segment) -> Result<Option<MappedRam>, DolphinError> {
    let file = std::fs::File::open(&seg.fd_link).map_err(|e| open_error(&seg.fd_link, e))?;
    let len = file.metadata().map_err(|e| open_error(&seg.fd_link, e))?.len();
    if len < addr::MEM1_SIZE as u64 {
        return Ok(None);
    }
    MappedRam::open(&file, addr::MEM1_SIZE).map(Some).map_err(|e| open_error(&seg.fd_link, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_dolphin_segment_names_only() {
        for good in ["/dev/shm/dolphin-emu.1234 (deleted)", "/dev/shm/dolphin-emu.7", "/dev/shm/dolphinmem.3 (deleted)", "/dev/shm/dolphinmem0"] {
            assert!(is_guest_ram_name(good), "{good}");
        }
        for bad in [
            "/dev/shm/dolphin-emu.12x (deleted)",
            "/tmp/dolphin-emu.12",
            "/dev/shm/other.1",
            "socket:[123]",
            "/dev/shm/dolphin-emu.1/x",
            "/dev/shm/dolphin-emu.",
            "",
        ] {
            assert!(!is_guest_ram_name(bad), "{bad}");
        }
    }

    #[test]
    fn scans_a_fd_directory_like_procs() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/null", dir.path().join("0")).unwrap();
        std::os::unix::fs::symlink("socket:[42]", dir.path().join("1")).unwrap();
        assert_eq!(scan_fd_dir(dir.path()).unwrap(), None);
        std::os::unix::fs::symlink("/dev/shm/dolphinmem1 (deleted)", dir.path().join("5")).unwrap();
        std::os::unix::fs::symlink("/dev/shm/dolphin-emu.99 (deleted)", dir.path().join("7")).unwrap();
        let seg = scan_fd_dir(dir.path()).unwrap().unwrap();
        assert_eq!(seg.target, "/dev/shm/dolphin-emu.99 (deleted)");
        assert_eq!(seg.fd_link, dir.path().join("7"));
        assert!(scan_fd_dir(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn permission_denied_says_what_to_do() {
        let err = open_error(Path::new("/proc/1/fd/9"), std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(err, DolphinError::PermissionDenied { .. }));
        let msg = err.to_string();
        assert!(msg.contains("same user") && msg.contains("/proc/1/fd/9"), "{msg}");
        let other = open_error(Path::new("/x"), std::io::Error::from_raw_os_error(libc::ENOENT));
        assert!(matches!(other, DolphinError::MapRam { .. }));
    }

    // Regression: CI caught Dolphin between creating its segment and sizing it, and the
    // backend gave up ("segment is 0 bytes") instead of looking again.
    #[test]
    fn a_segment_not_yet_sized_is_not_mapped_yet() {
        let dir = tempfile::tempdir().unwrap();
        let shm = dir.path().join("dolphin-emu.1");
        let file = std::fs::File::create(&shm).unwrap();
        let seg = Segment { fd_link: shm.clone(), target: "/dev/shm/dolphin-emu.1 (deleted)".into() };
        assert!(map_mem1(&seg).unwrap().is_none(), "an empty segment is not ready");
        file.set_len(addr::MEM1_SIZE as u64 / 2).unwrap();
        assert!(map_mem1(&seg).unwrap().is_none(), "a short segment is not ready");
        file.set_len(addr::MEM1_SIZE as u64).unwrap();
        let ram = map_mem1(&seg).unwrap().expect("a full-size segment maps");
        assert_eq!(ram.bytes().len(), addr::MEM1_SIZE);
    }
}
