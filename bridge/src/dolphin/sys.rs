//! Every `unsafe` line of the Dolphin backend: mapping guest RAM, creating a FIFO.
//!
//! # Safety
//!
//! **Mapping Dolphin's RAM.** [`MappedRam::open`] maps a file (the
//! `/proc/PID/fd/N` link to Dolphin's unlinked shared-memory segment) read-only and
//! `MAP_SHARED`. memmap2 marks this `unsafe` because the bytes can change, or
//! vanish, underneath the returned slice. What makes it sound enough here:
//! - *Lifetime*: the mapping holds its own reference to the segment, so it stays
//!   valid after Dolphin exits or is killed: the pages live until we unmap them.
//! - *Size*: we check the segment is at least as long as the view before mapping,
//!   and Dolphin never shrinks it (it sizes the segment once at start-up), so no
//!   access can fall past the end of the file (which would raise SIGBUS).
//! - *Concurrent writes*: Dolphin writes guest RAM while we read it. Every byte
//!   pattern is a valid `u8`, and all reads go through [`crate::RamView`], which copies
//!   values out (`copy_from_slice`) and never hands out references into the map, so
//!   the worst a racing write can do is give one torn value. The backend avoids even
//!   that by reading right after a frame tick (and, with a lock-step peer, while the
//!   emulator waits for our input). This is the same contract as any reader of a
//!   shared file map; ripgrep makes the same trade for the same speed.
//!
//! **Writing a segment (the test peer).** [`SharedRamWriter`] maps a file it just
//! created with `O_EXCL` and sized itself, read-write; nobody else truncates it.
//!
//! **The frame counter.** The tick reads (and the peer writes) the one word that says
//! "a frame ended" with an aligned atomic access on the shared page, acquire/release,
//! so it is never torn and the frame's other writes are visible once it moved.
//!
//! **mkfifo.** A plain libc call with a NUL-terminated path we built; no memory is
//! shared with it.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

/// A read-only, live map of the first `len` bytes of a file.
pub struct MappedRam {
    map: memmap2::Mmap,
}

impl MappedRam {
    /// Map `len` bytes of `file` from offset 0. Fails (instead of mapping) when the file
    /// is shorter than `len`, which would make reads past its end fault.
    pub fn open(file: &File, len: usize) -> io::Result<MappedRam> {
        let size = file.metadata()?.len();
        if size < len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("segment is {size} bytes, expected at least {len}")));
        }
        // SAFETY: see the module doc: the map outlives the writer, is never past the
        // end of the file, and is only read through copying accessors.
        let map = unsafe { memmap2::MmapOptions::new().offset(0).len(len).map(file)? };
        Ok(MappedRam { map })
    }
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
    /// The big-endian u32 at byte `off`, read with one aligned atomic load (acquire),
    /// so a counter the writer bumps is never seen torn. `None` when `off` is out of
    /// range or not 4-aligned.
    pub fn load_u32_be(&self, off: usize) -> Option<u32> {
        let p = aligned_word(&self.map, off)?;
        // SAFETY: `p` is 4-aligned and inside the map (checked by `aligned_word`); the
        // map lives as long as `self`. Atomic access to shared memory is what atomics
        // are for; the writer (Dolphin's guest, or the peer) stores whole words.
        let v = unsafe { AtomicU32::from_ptr(p as *mut u32) }.load(Ordering::Acquire);
        Some(u32::from_be(v))
    }
}

fn aligned_word(map: &[u8], off: usize) -> Option<*const u8> {
    let end = off.checked_add(4)?;
    let p = map.get(off..end)?.as_ptr();
    (p as usize).is_multiple_of(4).then_some(p)
}

/// A read-write map of a file this process created and owns (the test peer's RAM).
pub struct SharedRamWriter {
    map: memmap2::MmapMut,
}

impl SharedRamWriter {
    pub fn open(file: &File, len: usize) -> io::Result<SharedRamWriter> {
        if file.metadata()?.len() < len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "segment shorter than the map"));
        }
        // SAFETY: the caller created the file (O_EXCL) and sized it; nothing truncates it.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(file)? };
        Ok(SharedRamWriter { map })
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
    /// Store the big-endian u32 at byte `off` with one aligned atomic store (release):
    /// everything written before it is visible to a reader that sees the new value.
    /// Returns false when `off` is out of range or not 4-aligned.
    pub fn publish_u32_be(&mut self, off: usize, v: u32) -> bool {
        let Some(p) = aligned_word(&self.map, off) else { return false };
        // SAFETY: as in `MappedRam::load_u32_be`; `&mut self` excludes other writers here.
        unsafe { AtomicU32::from_ptr(p as *mut u32) }.store(v.to_be(), Ordering::Release);
        true
    }
}

/// `mkfifo(path, 0600)`.
pub fn mkfifo(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn map_sees_later_writes_and_refuses_short_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let mut f = std::fs::OpenOptions::new().create_new(true).read(true).write(true).open(&path).unwrap();
        f.set_len(4096).unwrap();
        let ro = MappedRam::open(&File::open(&path).unwrap(), 4096).unwrap();
        let mut rw = SharedRamWriter::open(&f, 4096).unwrap();
        rw.bytes_mut()[100] = 7;
        assert_eq!(ro.bytes()[100], 7, "a shared map is live");
        assert!(rw.publish_u32_be(8, 0x0102_0304));
        assert_eq!(&ro.bytes()[8..12], &[1, 2, 3, 4], "published big-endian");
        assert_eq!(ro.load_u32_be(8), Some(0x0102_0304));
        assert_eq!((ro.load_u32_be(9), ro.load_u32_be(4094)), (None, None), "unaligned or past the end");
        assert!(!rw.publish_u32_be(4096, 1));
        f.write_all(b"x").unwrap();
        assert!(MappedRam::open(&File::open(&path).unwrap(), 8192).is_err());
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo).unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(mkfifo(&fifo).is_err(), "mkfifo over an existing file fails");
    }
}
