//! The bot's controller: the FIFO Dolphin reads (docs/melee-reference.md, section 4).
//!
//! Dolphin opens the FIFO `O_RDONLY | O_NONBLOCK` when it populates its devices, so
//! the writer is opened after launch, non-blocking, retrying while nobody reads it yet
//! (`ENXIO`). Each frame's whole pad state is one `write()` of under `PIPE_BUF` bytes,
//! which POSIX makes atomic: Dolphin never sees half a frame.
//!
//! The writer stays non-blocking: a blocking write into a pipe whose reader hangs
//! would hang the worker with it. A full pipe (`EAGAIN`) is retried until a deadline;
//! a closed one (`EPIPE`, Dolphin exited; Rust ignores SIGPIPE) is an error at once.

use crate::pad::Pad;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Linux's PIPE_BUF: writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;

pub struct PadPipe {
    file: File,
    path: PathBuf,
    buf: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PipeError {
    #[error("nobody opened the controller pipe {path} for reading within {waited:?}")]
    NoReader { path: PathBuf, waited: Duration },
    #[error("the controller pipe {path} is full: the emulator stopped reading input for {waited:?}")]
    Stalled { path: PathBuf, waited: Duration },
    #[error("the controller pipe {path} was closed by the emulator (did it exit?)")]
    Closed { path: PathBuf },
    #[error("controller pipe {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl PadPipe {
    /// Open the FIFO for writing once a reader has it open; `alive` is asked between
    /// tries so a dead emulator ends the wait early (it returns the error to give).
    pub fn open(path: &Path, timeout: Duration, mut alive: impl FnMut() -> Result<(), PipeError>) -> Result<PadPipe, PipeError> {
        let start = Instant::now();
        loop {
            match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path) {
                Ok(file) => return Ok(PadPipe { file, path: path.to_path_buf(), buf: String::with_capacity(256) }),
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
                Err(source) => return Err(PipeError::Io { path: path.to_path_buf(), source }),
            }
            alive()?;
            if start.elapsed() > timeout {
                return Err(PipeError::NoReader { path: path.to_path_buf(), waited: timeout });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Write `pad` (and `FLUSH` when `flush`) in one `write()`.
    pub fn send(&mut self, pad: &Pad, flush: bool, timeout: Duration) -> Result<(), PipeError> {
        pad.encode_into(&mut self.buf, flush);
        debug_assert!(self.buf.len() < PIPE_BUF);
        let start = Instant::now();
        loop {
            match self.file.write(self.buf.as_bytes()) {
                // Atomic: a pipe write under PIPE_BUF is all or nothing.
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if start.elapsed() > timeout {
                        return Err(PipeError::Stalled { path: self.path.clone(), waited: timeout });
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Err(PipeError::Closed { path: self.path.clone() }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(PipeError::Io { path: self.path.clone(), source }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pad::{apply_all, Button};
    use std::io::Read;

    #[test]
    fn one_write_per_frame_and_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bot2");
        crate::dolphin::sys::mkfifo(&path).unwrap();
        // No reader: waits, then says so.
        let err = PadPipe::open(&path, Duration::from_millis(30), || Ok(())).err().unwrap();
        assert!(matches!(err, PipeError::NoReader { .. }), "{err}");
        // A reader opened like Dolphin's.
        let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).unwrap();
        let mut pipe = PadPipe::open(&path, Duration::from_secs(1), || Ok(())).unwrap();
        let pad = Pad::NEUTRAL.with(Button::A).with_main(1.0, 0.5);
        pipe.send(&pad, true, Duration::from_millis(10)).unwrap();
        let mut text = String::new();
        reader.read_to_string(&mut text).ok();
        assert!(text.ends_with("FLUSH\n"));
        let mut got = Pad::NEUTRAL;
        apply_all(&mut got, &text).unwrap();
        assert_eq!(got, pad);
        // Nobody reads: the pipe fills, then the writer reports a stall instead of blocking.
        let err = loop {
            if let Err(e) = pipe.send(&pad, false, Duration::from_millis(20)) {
                break e;
            }
        };
        assert!(matches!(err, PipeError::Stalled { .. }), "{err}");
        // The reader goes away: closed.
        drop(reader);
        let err = pipe.send(&pad, false, Duration::from_millis(20)).unwrap_err();
        assert!(matches!(err, PipeError::Closed { .. }), "{err}");
    }
}
