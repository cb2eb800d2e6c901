//! A bounded on-disk spool of encoded experience batches: the worker's write-ahead log.
//!
//! Every batch the actor produces is written here *before* it is sent, and its file is
//! deleted only after the manager answered 2xx. So gameplay survives a manager that is
//! away, a network that is down and a worker that is killed: the next start finds the
//! files and sends them. The manager deduplicates by the batch's `upload_id` (in the
//! header, hence in the file), so a batch sent twice (the answer was lost, the worker
//! died between the 2xx and the delete) is still counted once.
//!
//! - Atomic: a batch is written with `shine_agent::durable::write_atomic` (a `.tmp`
//!   file, synced, then renamed into place), so a crash never leaves a half-written
//!   batch under a real name; leftovers of such a crash are deleted on open.
//! - Ordered: names start with a sequence number (`{seq:016x}-{upload_id}.shxp`), and
//!   the oldest is sent first.
//! - Bounded by bytes and by count: when a new batch would pass a bound, the *oldest*
//!   batch is dropped (older gameplay was played by an older model and is the least
//!   useful), counted, and a warning says so.
//! - Exclusive: one worker per spool directory (a lock file), because two processes
//!   spooling into one directory would each miss the other's files until a restart.
//!
//! The spool is synchronous (plain `std::fs`); the async uploader calls it from
//! `spawn_blocking`.

use shine_agent::durable;
use shine_agent::experience::{Header, HEADER_LEN};
use std::collections::VecDeque;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use thiserror::Error;

const EXT: &str = "shxp";
const LOCK: &str = "lock";

#[derive(Debug, Error)]
pub enum SpoolError {
    #[error("spool directory {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("spool directory {0} is in use by another shine-worker: give each worker its own --spool-dir")]
    Locked(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SpoolError + '_ {
    move |source| SpoolError::Io { path: path.to_path_buf(), source }
}

/// How much the spool may hold. A new batch is always kept, even alone over a bound:
/// dropping the batch just played to make room for nothing would be pointless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpoolLimits {
    pub max_bytes: u64,
    pub max_batches: usize,
}

impl Default for SpoolLimits {
    /// 1 GiB or 10,000 batches: at the default 2,000 transitions per batch (about
    /// 150 kB compressed) that is hours of one worker's play.
    fn default() -> Self {
        SpoolLimits { max_bytes: 1 << 30, max_batches: 10_000 }
    }
}

/// One spooled batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub name: String,
    pub bytes: u64,
    /// Transitions in the batch (from its header), for accounting.
    pub transitions: u64,
}

/// What [`Spool::push`] had to drop to stay within its limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped {
    pub batches: u64,
    pub transitions: u64,
}

#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    limits: SpoolLimits,
    entries: VecDeque<Entry>,
    bytes: u64,
    next_seq: u64,
    /// The batch being sent right now: never dropped under it, or a delivered batch
    /// would be counted as lost.
    in_flight: Option<u64>,
    dropped: Dropped,
    // Held for the spool's lifetime; the OS releases the lock when the process dies.
    _lock: File,
}

/// The transition count in an encoded batch's header (0 when it does not parse: the
/// manager will say what is wrong with it).
fn header_count(header: &[u8]) -> u64 {
    Header::parse(header).map_or(0, |h| h.count as u64)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Spool {
    /// Open (creating it if needed) the spool in `dir` and pick up the batches a
    /// previous run left there.
    pub fn open(dir: &Path, limits: SpoolLimits) -> Result<Spool, SpoolError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock_path = dir.join(LOCK);
        let lock = File::options().create(true).truncate(false).write(true).open(&lock_path).map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(SpoolError::Locked(dir.to_path_buf())),
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
        let mut entries = Vec::new();
        for item in fs::read_dir(dir).map_err(io_err(dir))? {
            let item = item.map_err(io_err(dir))?;
            let name = item.file_name().to_string_lossy().into_owned();
            let path = item.path();
            if name.ends_with(durable::TMP_SUFFIX) {
                // A write that crashed before its rename: the batch was never complete.
                fs::remove_file(&path).map_err(io_err(&path))?;
                continue;
            }
            let Some(seq) = name.strip_suffix(&format!(".{EXT}")).and_then(|s| s.split('-').next()).and_then(|s| u64::from_str_radix(s, 16).ok()) else {
                continue;
            };
            let bytes = item.metadata().map_err(io_err(&path))?.len();
            let mut header = [0u8; HEADER_LEN];
            let transitions = match File::open(&path).and_then(|mut f| io::Read::read_exact(&mut f, &mut header)) {
                Ok(()) => header_count(&header),
                Err(_) => 0,
            };
            entries.push(Entry { seq, name, bytes, transitions });
        }
        entries.sort_by(|a, b| (a.seq, &a.name).cmp(&(b.seq, &b.name)));
        let next_seq = entries.last().map_or(0, |e| e.seq + 1);
        let bytes = entries.iter().map(|e| e.bytes).sum();
        Ok(Spool { dir: dir.to_path_buf(), limits, entries: entries.into(), bytes, next_seq, in_flight: None, dropped: Dropped::default(), _lock: lock })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Bytes of all spooled batches.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// Transitions in all spooled batches.
    pub fn transitions(&self) -> u64 {
        self.entries.iter().map(|e| e.transitions).sum()
    }
    /// Everything dropped for lack of room since this spool was opened.
    pub fn dropped(&self) -> &Dropped {
        &self.dropped
    }

    /// Store one encoded batch durably (temp file, fsync, rename), then drop the oldest
    /// batches while a limit is exceeded. `upload_id` goes into the name so that names
    /// never collide.
    pub fn push(&mut self, batch: &[u8], upload_id: &[u8; 16]) -> Result<Dropped, SpoolError> {
        let seq = self.next_seq;
        let name = format!("{seq:016x}-{}.{EXT}", hex(upload_id));
        let path = self.dir.join(&name);
        durable::write_atomic(&path, batch).map_err(io_err(&path))?;
        self.next_seq += 1;
        self.bytes += batch.len() as u64;
        self.entries.push_back(Entry { seq, name, bytes: batch.len() as u64, transitions: header_count(&batch[..batch.len().min(HEADER_LEN)]) });

        let mut dropped = Dropped::default();
        while self.entries.len() > self.limits.max_batches || self.bytes > self.limits.max_bytes {
            // The oldest that is neither in flight nor the batch just written.
            let Some(i) = (0..self.entries.len() - 1).find(|&i| Some(self.entries[i].seq) != self.in_flight) else { break };
            let e = self.entries.remove(i).expect("index in range");
            self.bytes -= e.bytes;
            self.delete_file(&e.name)?;
            dropped.batches += 1;
            dropped.transitions += e.transitions;
        }
        if dropped.batches > 0 {
            self.dropped.batches += dropped.batches;
            self.dropped.transitions += dropped.transitions;
            tracing::warn!(
                dropped_batches = dropped.batches,
                dropped_transitions = dropped.transitions,
                total_dropped_batches = self.dropped.batches,
                spooled_batches = self.entries.len(),
                spooled_mib = self.bytes as f64 / (1 << 20) as f64,
                max_batches = self.limits.max_batches,
                max_mib = self.limits.max_bytes as f64 / (1 << 20) as f64,
                dir = %self.dir.display(),
                "spool full: dropped the OLDEST batch(es) to make room; the manager has been unreachable for a long time (raise the spool limits to keep more)"
            );
        }
        Ok(dropped)
    }

    /// The oldest batch, marked as being sent until [`Spool::remove`] or
    /// [`Spool::release`]. Returns its entry and bytes.
    pub fn take_oldest(&mut self) -> Result<Option<(Entry, Vec<u8>)>, SpoolError> {
        let Some(e) = self.entries.front().cloned() else { return Ok(None) };
        let path = self.dir.join(&e.name);
        let bytes = fs::read(&path).map_err(io_err(&path))?;
        self.in_flight = Some(e.seq);
        Ok(Some((e, bytes)))
    }

    /// The batch was accepted by the manager (2xx), or rejected for good (4xx): delete it.
    pub fn remove(&mut self, seq: u64) -> Result<(), SpoolError> {
        if self.in_flight == Some(seq) {
            self.in_flight = None;
        }
        if let Some(i) = self.entries.iter().position(|e| e.seq == seq) {
            let e = self.entries.remove(i).expect("index in range");
            self.bytes -= e.bytes;
            self.delete_file(&e.name)?;
        }
        Ok(())
    }

    /// Sending failed and will be retried: the batch stays, and may be dropped again
    /// when the spool is full.
    pub fn release(&mut self, seq: u64) {
        if self.in_flight == Some(seq) {
            self.in_flight = None;
        }
    }

    fn delete_file(&self, name: &str) -> Result<(), SpoolError> {
        let path = self.dir.join(name);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(&path)(e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shine_agent::experience::{encode, BatchMeta, TRANSITION_FLOATS};

    fn batch(id: u8, transitions: usize) -> (Vec<u8>, [u8; 16]) {
        let upload_id = [id; 16];
        let meta = BatchMeta { worker_id: 1, model_version: 1, n_step: 1, upload_id };
        (encode(&meta, &vec![0.0; transitions * TRANSITION_FLOATS], false), upload_id)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n != LOCK).collect();
        v.sort();
        v
    }

    #[test]
    fn batches_come_back_oldest_first_and_are_deleted_only_when_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), SpoolLimits::default()).unwrap();
        let (a, ida) = batch(1, 2);
        let (b, idb) = batch(2, 3);
        s.push(&a, &ida).unwrap();
        s.push(&b, &idb).unwrap();
        assert_eq!((s.len(), s.bytes(), s.transitions()), (2, (a.len() + b.len()) as u64, 5));
        let (e, bytes) = s.take_oldest().unwrap().unwrap();
        assert_eq!(bytes, a);
        // A failed send keeps it first in line.
        s.release(e.seq);
        let (e, bytes) = s.take_oldest().unwrap().unwrap();
        assert_eq!(bytes, a);
        s.remove(e.seq).unwrap();
        assert_eq!(s.take_oldest().unwrap().unwrap().1, b);
        assert_eq!(names(dir.path()).len(), 1, "only b's file is left");
    }

    #[test]
    fn survives_a_restart_and_keeps_numbering_after_the_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, ida) = batch(1, 1);
        let (b, idb) = batch(2, 4);
        {
            let mut s = Spool::open(dir.path(), SpoolLimits::default()).unwrap();
            s.push(&a, &ida).unwrap();
            s.push(&b, &idb).unwrap();
        }
        // A crash in the middle of a write leaves a temp file behind.
        fs::write(dir.path().join(format!("0000000000000002-ff.{EXT}{}", durable::TMP_SUFFIX)), b"half a batch").unwrap();
        let mut s = Spool::open(dir.path(), SpoolLimits::default()).unwrap();
        assert_eq!((s.len(), s.transitions()), (2, 5));
        assert!(names(dir.path()).iter().all(|n| !n.ends_with(durable::TMP_SUFFIX)), "temp leftovers are deleted: {:?}", names(dir.path()));
        let (c, idc) = batch(3, 1);
        s.push(&c, &idc).unwrap();
        let mut got = Vec::new();
        while let Some((e, bytes)) = s.take_oldest().unwrap() {
            got.push(bytes);
            s.remove(e.seq).unwrap();
        }
        assert_eq!(got, vec![a, b, c], "old batches first, the new one after them");
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn full_spool_drops_the_oldest_and_counts_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), SpoolLimits { max_bytes: u64::MAX, max_batches: 2 }).unwrap();
        let batches: Vec<_> = (1..=4).map(|i| batch(i, i as usize)).collect();
        for (b, id) in &batches[..2] {
            assert_eq!(s.push(b, id).unwrap(), Dropped::default());
        }
        assert_eq!(s.push(&batches[2].0, &batches[2].1).unwrap(), Dropped { batches: 1, transitions: 1 });
        assert_eq!(s.push(&batches[3].0, &batches[3].1).unwrap(), Dropped { batches: 1, transitions: 2 });
        assert_eq!(s.dropped(), &Dropped { batches: 2, transitions: 3 });
        assert_eq!(s.len(), 2);
        assert_eq!(names(dir.path()).len(), 2, "dropped files are deleted");
        assert_eq!(s.take_oldest().unwrap().unwrap().1, batches[2].0, "the two newest are kept");
    }

    #[test]
    fn byte_limit_drops_oldest_but_never_the_batch_in_flight_or_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let (a, ida) = batch(1, 10);
        let limit = 2 * a.len() as u64;
        let mut s = Spool::open(dir.path(), SpoolLimits { max_bytes: limit, max_batches: 100 }).unwrap();
        s.push(&a, &ida).unwrap();
        let (b, idb) = batch(2, 10);
        s.push(&b, &idb).unwrap();
        let (sending, _) = s.take_oldest().unwrap().unwrap();
        let (c, idc) = batch(3, 10);
        let dropped = s.push(&c, &idc).unwrap();
        assert_eq!(dropped.batches, 1);
        assert!(s.bytes() <= limit);
        // a is being sent, so b went; a's delivery is still recorded.
        s.remove(sending.seq).unwrap();
        assert_eq!(s.take_oldest().unwrap().unwrap().1, c);
        // A single batch larger than the whole limit is still kept.
        let tiny_dir = tempfile::tempdir().unwrap();
        let mut tiny = Spool::open(tiny_dir.path(), SpoolLimits { max_bytes: 10, max_batches: 100 }).unwrap();
        assert_eq!(tiny.push(&a, &ida).unwrap().batches, 0);
        assert_eq!(tiny.len(), 1);
    }

    #[test]
    fn a_second_worker_on_the_same_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Spool::open(dir.path(), SpoolLimits::default()).unwrap();
        let err = Spool::open(dir.path(), SpoolLimits::default()).unwrap_err();
        assert!(matches!(err, SpoolError::Locked(_)), "{err}");
        assert!(err.to_string().contains("--spool-dir"));
    }
}
