//! The write-ahead log of accepted uploads: why a `202` means kept.
//!
//! ```text
//! api::experience ─ validated upload ─► Wal::append ─► writer thread: write, fsync (group commit) ─► answer ─► 202
//! start-up: recover(<data_dir>/wal) ─► the newest `capacity` transitions ─► replay;  their upload ids ─► dedup
//! ```
//!
//! Each accepted upload is appended, as the bytes that arrived (header and compressed
//! payload: the upload id, worker and model version are in its header), to the current
//! segment file `<data_dir>/wal/<first record number, 16 hex>.seg` as one record (format
//! version 2, below). One thread writes: it takes every append waiting, writes them all,
//! then makes them durable with **one** fsync (group commit), and only then are their
//! uploads answered. [`Durability`] trades that for speed.
//!
//! ```text
//! record = marker "\x89SHWAL\r\n" (8 bytes) | number u64 LE | len u32 LE | crc32(payload) u32 LE
//!        | crc32(the 24 bytes before) u32 LE | payload (len bytes)
//! ```
//!
//! A damaged byte costs only the record it is in. The header has its own checksum, so a
//! damaged length is never used to find the next record (format version 1, `len, crc32,
//! payload`, trusted it: one flipped bit in a length could lose the rest of the segment). A
//! record whose header checks out but whose payload does not is stepped over by its
//! length; after a header that does not check out, the reader scans forward for the next
//! marker whose header and payload both check out, and goes on from there. The record
//! number (segment names count the same numbers) says how many records the damage took.
//!
//! Why a marker per record rather than LevelDB's log of fixed 32 KiB blocks (records cut
//! into fragments, a reader that meets a bad fragment resuming at the next block): a block
//! holds several uploads of a few KiB, and a damaged byte there costs every upload after
//! it in that block, not just its own; and uploads of up to 32 MiB would be cut into
//! a thousand fragments to write and reassemble, where here an upload's bytes stay one
//! run on disk behind 28 bytes of header. The price is the scan after damage (bounded by
//! the segment, and paid only then) and that a scan may meet the marker inside a damaged
//! record's payload: it is taken only if a header checksum and a payload checksum behind
//! it also check out, which random bytes do not (an upload crafted to hold a whole record
//! could: that record would be a valid upload, its id taken once like any other).
//!
//! A segment rolls over at `[wal] segment_mb`; a segment is deleted once the
//! segments after it hold at least the replay's capacity in transitions (its rows could
//! no longer be in the replay), so the log on disk stays near the replay's size (about
//! 100 MB of zstd for a million transitions; `shine_wal_bytes`).
//!
//! Recovery ([`recover`]) reads the segments in order: damage at the end of the last
//! segment, with no valid record after it, is a torn tail (a crash in the middle of a
//! write) and is cut back to the last whole record with one warning; a record elsewhere
//! whose checksum or content is wrong is skipped and counted; a record whose upload id
//! was seen before (two copies of one retried upload raced) is not taken twice.
//! `wal/meta.json` says what the records were written for (state dimension, action set,
//! n-step): a manager configured otherwise refuses to start and says what to do, rather
//! than train on rows that mean something else.
//!
//! Logs written in format version 1 (`meta.json` `version: 1`) still read: their segments
//! are read with the version-1 framing as they are (never rewritten), and the first
//! manager to write to such a log records in `meta.json` (`version: 2`,
//! `v1_segments_before`) that segments named below its first new segment are version 1,
//! then writes only new segments, in version 2. The old segments go as the log's oldest
//! segments always do.
//!
//! A write that fails (disk full, a file-size limit) is cut back and answered
//! [`WalError::StorageFull`] (HTTP 503 `storage_full`): the upload was not kept, the
//! worker keeps it in its spool, and what was acknowledged before is untouched.

use serde::{Deserialize, Serialize};
use shine_agent::experience::{self, Expect, TRANSITION_FLOATS};
use shine_agent::state::STATE_DIM;
use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use thiserror::Error;
use tokio::sync::oneshot;

/// Format version 1: `len: u32 LE, crc32(payload): u32 LE` before each payload.
const V1_FRAME: usize = 8;
/// Format version 2 (see the module doc): what starts every record.
const MARKER: [u8; 8] = *b"\x89SHWAL\r\n";
/// Format version 2: bytes before each payload (marker, number, length, two CRC-32s).
const HEADER: usize = 28;
const SEGMENT_EXT: &str = "seg";
const META_FILE: &str = "meta.json";
const META_FORMAT: &str = "shine-wal";
/// The format new segments are written in.
const META_VERSION: u32 = 2;

/// How hard an acknowledged upload is kept (`[wal] durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Written and fsynced before the answer (group commit: concurrent uploads share
    /// one fsync). Survives a crash of the manager and a power failure.
    Fsync,
    /// Written to the operating system before the answer, not fsynced: survives a
    /// crash of the manager (`kill -9`), not a power failure or a kernel crash.
    Os,
    /// No log: a restart starts with an empty replay and forgets which uploads it had.
    Off,
}

/// The `[wal]` section of `configs/manager.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalConfig {
    pub durability: Durability,
    /// A segment file rolls over at this size (MiB).
    pub segment_mb: u64,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig { durability: Durability::Fsync, segment_mb: 64 }
    }
}

#[derive(Debug, Error)]
pub enum WalError {
    /// The disk is full or a file-size limit was hit: nothing was written.
    #[error("the manager's disk is full: the upload was not kept ({0})")]
    StorageFull(String),
    /// Any other I/O failure of the log.
    #[error("the write-ahead log failed: {0}")]
    Io(String),
    #[error("the write-ahead log is closed (the manager is stopping)")]
    Closed,
}

/// What the records were written for; a different configuration cannot use them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalMeta {
    pub format: String,
    /// The format of the segments: 1, or 2 (those named below `v1_segments_before` in 1).
    pub version: u32,
    pub state_dim: usize,
    pub action_set: String,
    pub actions: usize,
    pub n_step: u8,
    /// Set when a version-1 log was continued in version 2: the first record number
    /// (segment name) written in version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1_segments_before: Option<u64>,
}

impl WalMeta {
    pub fn new(action_set: &str, expect: Expect) -> Self {
        WalMeta {
            format: META_FORMAT.into(),
            version: META_VERSION,
            state_dim: STATE_DIM,
            action_set: action_set.into(),
            actions: expect.actions,
            n_step: expect.n_step,
            v1_segments_before: None,
        }
    }

    /// Written for the same rows as `other` (whatever the format version).
    fn same_rows(&self, other: &WalMeta) -> bool {
        (self.state_dim, &self.action_set, self.actions, self.n_step) == (other.state_dim, &other.action_set, other.actions, other.n_step)
    }
}

/// Counters of the log, for `/metrics` and the stats.
#[derive(Debug, Default)]
pub struct WalStats {
    /// Bytes of all segment files.
    pub bytes: AtomicU64,
    pub segments: AtomicU64,
    pub records: AtomicU64,
    /// Group commits (one fsync each).
    pub fsyncs: AtomicU64,
}

/// One segment on disk.
#[derive(Debug, Clone)]
struct Segment {
    /// The number of its first record (its name).
    first: u64,
    path: PathBuf,
    bytes: u64,
    /// Transitions in its valid records.
    rows: u64,
    /// Written in format version 1: read, never appended to.
    v1: bool,
}

fn segment_name(first_record: u64) -> String {
    format!("{first_record:016x}.{SEGMENT_EXT}")
}

/// The segments of `dir`, oldest first.
fn list_segments(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == SEGMENT_EXT) && p.file_stem().is_some_and(|s| u64::from_str_radix(&s.to_string_lossy(), 16).is_ok()))
        .collect();
    v.sort();
    Ok(v)
}

fn is_storage_full(e: &std::io::Error) -> bool {
    // ENOSPC (disk full), EFBIG (RLIMIT_FSIZE or the filesystem's file-size limit),
    // EDQUOT (quota).
    matches!(e.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::FileTooLarge | std::io::ErrorKind::QuotaExceeded)
}

fn io_error(e: std::io::Error) -> WalError {
    if is_storage_full(&e) {
        WalError::StorageFull(e.to_string())
    } else {
        WalError::Io(e.to_string())
    }
}

/// What [`recover`] found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The newest transitions, at most the replay's capacity, oldest first
    /// (`count x 57` floats).
    pub rows: Vec<f32>,
    /// Upload ids of the records kept on disk, oldest first, each once.
    pub upload_ids: Vec<[u8; 16]>,
    /// Valid records read, and the transitions they hold.
    pub records: u64,
    pub transitions: u64,
    /// Records skipped: a wrong checksum or content (counted, never fatal).
    pub corrupt: u64,
    /// Records whose upload id came before (a retried upload that raced its copy).
    pub repeats: u64,
    /// Bytes cut from the end of the last segment (a write the crash tore).
    pub torn_bytes: u64,
    segments: Vec<Segment>,
    next_record: u64,
    /// The log's `meta.json` when it says format version 1: the writer marks where
    /// version 2 starts before it writes anything.
    v1_meta: Option<WalMeta>,
}

/// A valid record, found by the first pass.
struct Found {
    payload: Vec<u8>,
    count: u64,
    upload_id: [u8; 16],
}

fn segment_first(path: &Path) -> u64 {
    u64::from_str_radix(&path.file_stem().expect("listed").to_string_lossy(), 16).expect("listed")
}

/// Keep a record whose checksum checked out, if its content is an upload's.
fn take(payload: &[u8], out: &mut Vec<Found>, rows: &mut u64, rec: &mut Recovered) {
    match experience::Header::parse(payload) {
        Ok(h) => {
            *rows += h.count as u64;
            out.push(Found { payload: payload.to_vec(), count: h.count as u64, upload_id: h.meta.upload_id });
        }
        Err(_) => rec.corrupt += 1,
    }
}

/// Cut a torn tail off the last segment: everything from `at` on.
fn cut_torn_tail(path: &Path, at: usize, len: usize, rec: &mut Recovered) -> std::io::Result<()> {
    let cut = (len - at) as u64;
    tracing::warn!(segment = %path.display(), bytes = cut, "the write-ahead log ends in a torn record (a crash mid-write); cutting it back to the last whole record");
    OpenOptions::new().write(true).open(path)?.set_len(at as u64)?;
    rec.torn_bytes += cut;
    Ok(())
}

/// Read a format-version-1 segment (`len, crc32, payload`); the `last` segment may have
/// a torn tail, which is cut. A damaged length loses the rest of the segment: the
/// version-1 framing has nothing to find the next record by.
fn read_segment_v1(path: &Path, last: bool, out: &mut Vec<Found>, rec: &mut Recovered) -> std::io::Result<Segment> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let mut at = 0usize;
    let mut rows = 0u64;
    while at < bytes.len() {
        let Some(frame) = bytes.get(at..at + V1_FRAME) else { break };
        let len = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(frame[4..].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(at + V1_FRAME..at + V1_FRAME + len) else { break };
        let end = at + V1_FRAME + len;
        if crc32fast::hash(payload) != crc {
            if last && end == bytes.len() {
                // The last record, cut short or half written: the torn tail below.
                break;
            }
            rec.corrupt += 1;
            at = end;
            continue;
        }
        take(payload, out, &mut rows, rec);
        at = end;
    }
    if at < bytes.len() {
        if last {
            cut_torn_tail(path, at, bytes.len(), rec)?;
        } else {
            // A length that runs past the end of a sealed segment: its rest is unreadable.
            tracing::warn!(segment = %path.display(), bytes = bytes.len() - at, "a write-ahead log segment ends in an unreadable record; skipping its rest");
            rec.corrupt += 1;
        }
    }
    Ok(Segment { first: segment_first(path), path: path.to_path_buf(), bytes: at as u64, rows, v1: true })
}

/// The format-version-2 header of record `number` holding `payload`.
fn header(number: u64, payload: &[u8]) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(&MARKER);
    h[8..16].copy_from_slice(&number.to_le_bytes());
    h[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[20..24].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let head_crc = crc32fast::hash(&h[..24]);
    h[24..].copy_from_slice(&head_crc.to_le_bytes());
    h
}

/// What starts at an offset of a version-2 segment.
enum At {
    /// A whole record whose header and payload check out.
    Record { number: u64, payload: std::ops::Range<usize> },
    /// A header that checks out before a payload that does not: the record ends at `end`.
    BadPayload { end: usize },
    /// No header that checks out, or a record running past the end of the file.
    Nothing,
}

fn at(bytes: &[u8], at: usize) -> At {
    let Some(h) = bytes.get(at..at + HEADER) else { return At::Nothing };
    let field = |r: std::ops::Range<usize>| u32::from_le_bytes(h[r].try_into().expect("4 bytes"));
    if h[..8] != MARKER || crc32fast::hash(&h[..24]) != field(24..28) {
        return At::Nothing;
    }
    let number = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
    let payload = at + HEADER..at + HEADER + field(16..20) as usize;
    match bytes.get(payload.clone()) {
        Some(p) if crc32fast::hash(p) == field(20..24) => At::Record { number, payload },
        Some(_) => At::BadPayload { end: payload.end },
        None => At::Nothing,
    }
}

/// The offset of the next record (from `from` on) whose header and payload check out.
fn next_record(bytes: &[u8], mut from: usize) -> Option<usize> {
    while let Some(i) = bytes.get(from..)?.windows(MARKER.len()).position(|w| w == MARKER) {
        if matches!(at(bytes, from + i), At::Record { .. }) {
            return Some(from + i);
        }
        from += i + 1;
    }
    None
}

/// Read a format-version-2 segment: damage costs the records it is in, counted by the
/// gap in record numbers to the next good record (or, at the end of a sealed segment, to
/// `next_first`, the next segment's first number). Damage at the end of the `last`
/// segment, with no good record after it, is a torn tail and is cut.
fn read_segment_v2(path: &Path, last: bool, next_first: Option<u64>, out: &mut Vec<Found>, rec: &mut Recovered) -> std::io::Result<(Segment, u64)> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let first = segment_first(path);
    let (mut pos, mut good_end, mut rows, mut expected) = (0usize, 0usize, 0u64, first);
    let mut junk = 0usize;
    while pos < bytes.len() {
        match at(&bytes, pos) {
            At::Record { number, payload } => {
                junk += pos - good_end;
                rec.corrupt += number.saturating_sub(expected);
                expected = expected.max(number.saturating_add(1));
                take(&bytes[payload.clone()], out, &mut rows, rec);
                pos = payload.end;
                good_end = pos;
            }
            // Its length checked out: step over it (the gap in numbers counts it).
            At::BadPayload { end } => pos = end,
            At::Nothing => pos = next_record(&bytes, pos + 1).unwrap_or(bytes.len()),
        }
    }
    if good_end < bytes.len() {
        if last {
            cut_torn_tail(path, good_end, bytes.len(), rec)?;
        } else {
            junk += bytes.len() - good_end;
            rec.corrupt += next_first.unwrap_or(expected).saturating_sub(expected);
        }
    }
    if junk > 0 {
        tracing::warn!(segment = %path.display(), bytes = junk, "skipped damaged bytes in the write-ahead log");
    }
    let seg = Segment { first, path: path.to_path_buf(), bytes: if last { good_end } else { bytes.len() } as u64, rows, v1: false };
    Ok((seg, expected))
}

/// Check `<dir>/meta.json` against `meta` (writing it for a new log); what it says.
fn check_meta(dir: &Path, meta: &WalMeta) -> anyhow::Result<WalMeta> {
    let path = dir.join(META_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let found: WalMeta =
                serde_json::from_slice(&bytes).map_err(|e| anyhow::anyhow!("{} is not a Shine write-ahead log description ({e})", path.display()))?;
            if found.format != META_FORMAT || !(1..=META_VERSION).contains(&found.version) {
                anyhow::bail!(
                    "{} describes a {:?} log in format version {}; this shine-manager reads {META_FORMAT:?} versions 1 to {META_VERSION} (a newer \
                     shine-manager wrote it?)",
                    path.display(),
                    found.format,
                    found.version
                );
            }
            if !found.same_rows(meta) {
                anyhow::bail!(
                    "the write-ahead log in {} holds uploads for state dimension {}, action set {:?} ({} actions), n_step {}, but this manager is \
                     configured for state dimension {}, action set {:?} ({} actions), n_step {}: use the configuration it was written with, or \
                     start with another --data-dir (or move {} away to start with an empty replay)",
                    dir.display(),
                    found.state_dim,
                    found.action_set,
                    found.actions,
                    found.n_step,
                    meta.state_dim,
                    meta.action_set,
                    meta.actions,
                    meta.n_step,
                    dir.display()
                );
            }
            Ok(found)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            shine_agent::durable::write_atomic(&path, &serde_json::to_vec_pretty(meta)?).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            Ok(meta.clone())
        }
        Err(e) => Err(anyhow::anyhow!("reading {}: {e}", path.display())),
    }
}

/// Read the log in `dir` (created if missing): the newest `capacity` transitions and
/// the upload ids, decoded with `expect`. Cuts a torn tail; never panics on bad bytes.
pub fn recover(dir: &Path, meta: &WalMeta, capacity: usize, expect: Expect) -> anyhow::Result<Recovered> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    let on_disk = check_meta(dir, meta)?;
    // Segments named below this are in format version 1.
    let v1_before = if on_disk.version == 1 { u64::MAX } else { on_disk.v1_segments_before.unwrap_or(0) };
    let mut rec = Recovered { v1_meta: (on_disk.version == 1).then_some(on_disk), ..Default::default() };
    let paths = list_segments(dir).map_err(|e| anyhow::anyhow!("reading {}: {e}", dir.display()))?;
    let mut found = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let (last, first) = (i + 1 == paths.len(), segment_first(p));
        let read = if first < v1_before {
            let before = found.len();
            read_segment_v1(p, last, &mut found, &mut rec).map(|seg| (seg, first + (found.len() - before) as u64))
        } else {
            read_segment_v2(p, last, paths.get(i + 1).map(|n| segment_first(n)), &mut found, &mut rec)
        };
        let (seg, next) = read.map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?;
        rec.next_record = rec.next_record.max(next);
        rec.segments.push(seg);
    }
    if v1_before != u64::MAX {
        // New segments must be named at or above the version-2 mark, or they would be read as version 1.
        rec.next_record = rec.next_record.max(v1_before);
    }
    // Repeats of an upload id (never the all-zero "no id") are dropped, first copy wins.
    let mut seen = HashSet::new();
    found.retain(|f| {
        if f.upload_id != [0; 16] && !seen.insert(f.upload_id) {
            rec.repeats += 1;
            return false;
        }
        true
    });
    rec.records = found.len() as u64;
    rec.transitions = found.iter().map(|f| f.count).sum();
    rec.upload_ids = found.iter().map(|f| f.upload_id).filter(|id| *id != [0; 16]).collect();
    // The newest records that hold `capacity` transitions, decoded oldest first.
    let mut need = capacity as u64;
    let mut first = found.len();
    while first > 0 && need > 0 {
        first -= 1;
        need = need.saturating_sub(found[first].count);
    }
    let mut rows: Vec<f32> = Vec::with_capacity(capacity.min(rec.transitions as usize) * TRANSITION_FLOATS);
    for f in &found[first..] {
        match experience::decode(&f.payload, expect) {
            Ok(b) => rows.extend_from_slice(&b.data),
            Err(e) => {
                tracing::warn!("skipping a write-ahead log record that does not decode: {e}");
                rec.corrupt += 1;
            }
        }
    }
    let extra = (rows.len() / TRANSITION_FLOATS).saturating_sub(capacity);
    rows.drain(..extra * TRANSITION_FLOATS);
    rec.rows = rows;
    Ok(rec)
}

/// What a manager does at start: with a log, [`recover`] it (one line in the log says
/// what was found) and open it for appending; with durability `off`, neither.
pub fn start(dir: &Path, cfg: &WalConfig, meta: &WalMeta, capacity: usize, expect: Expect) -> anyhow::Result<(Recovered, Wal)> {
    if cfg.durability == Durability::Off {
        let none = Recovered::default();
        let wal = Wal::open(dir, cfg, capacity, &none)?;
        return Ok((none, wal));
    }
    tracing::info!(dir = %dir.display(), "reading the write-ahead log");
    let t = std::time::Instant::now();
    let rec = recover(dir, meta, capacity, expect)?;
    tracing::info!(
        records = rec.records,
        transitions = rec.transitions,
        replay_rows = rec.rows.len() / TRANSITION_FLOATS,
        corrupt_skipped = rec.corrupt,
        repeats_skipped = rec.repeats,
        torn_bytes_cut = rec.torn_bytes,
        secs = format!("{:.2}", t.elapsed().as_secs_f64()),
        "replay rebuilt from the write-ahead log"
    );
    let wal = Wal::open(dir, cfg, capacity, &rec)?;
    Ok((rec, wal))
}

/// One append waiting for the writer.
struct Append {
    bytes: axum::body::Bytes,
    rows: u64,
    done: oneshot::Sender<Result<(), WalError>>,
}

/// The log's writing end (cloneable); the writer thread stops when every clone is
/// dropped.
#[derive(Clone)]
pub struct Wal {
    tx: Option<mpsc::Sender<Append>>,
    pub stats: Arc<WalStats>,
}

impl Wal {
    /// Open the log for appending after [`recover`] (which found its segments). With
    /// durability `off` nothing is written and `append` answers at once.
    pub fn open(dir: &Path, cfg: &WalConfig, capacity: usize, recovered: &Recovered) -> anyhow::Result<Wal> {
        Wal::open_with(dir, cfg.durability, cfg.segment_mb.max(1) << 20, capacity, recovered)
    }

    fn open_with(dir: &Path, durability: Durability, segment_bytes: u64, capacity: usize, recovered: &Recovered) -> anyhow::Result<Wal> {
        let stats = Arc::new(WalStats::default());
        if durability == Durability::Off {
            return Ok(Wal { tx: None, stats });
        }
        let mut writer = Writer {
            dir: dir.to_path_buf(),
            durability,
            segment_bytes,
            capacity: capacity as u64,
            segments: recovered.segments.iter().cloned().collect(),
            file: None,
            next_record: recovered.next_record,
            stats: stats.clone(),
        };
        if let Some(old) = &recovered.v1_meta {
            // A version-1 log: say where version 2 starts before writing any of it.
            let first = writer.new_segment_first();
            let path = dir.join(META_FILE);
            let meta = WalMeta { version: META_VERSION, v1_segments_before: Some(first), ..old.clone() };
            shine_agent::durable::write_atomic(&path, &serde_json::to_vec_pretty(&meta)?).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            tracing::info!(dir = %dir.display(), first_record = first, "the write-ahead log is in format version 1: its segments stay as they are, new ones are written in version 2");
        }
        writer.open_segment().map_err(|e| anyhow::anyhow!("opening the write-ahead log in {}: {e}", dir.display()))?;
        writer.prune();
        writer.publish_stats();
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new().name("shine-wal".into()).spawn(move || writer.run(rx))?;
        Ok(Wal { tx: Some(tx), stats })
    }

    /// Append one validated upload (`rows` transitions); resolves once it is as
    /// durable as the configured [`Durability`] makes it.
    pub async fn append(&self, bytes: axum::body::Bytes, rows: u64) -> Result<(), WalError> {
        let Some(tx) = &self.tx else { return Ok(()) };
        let (done, answer) = oneshot::channel();
        tx.send(Append { bytes, rows, done }).map_err(|_| WalError::Closed)?;
        answer.await.map_err(|_| WalError::Closed)?
    }
}

struct Writer {
    dir: PathBuf,
    durability: Durability,
    segment_bytes: u64,
    capacity: u64,
    /// Oldest first; the last is the one being written.
    segments: VecDeque<Segment>,
    file: Option<File>,
    next_record: u64,
    stats: Arc<WalStats>,
}

impl Writer {
    /// The name (first record number) of the next new segment: names only go up, even
    /// past a segment whose records were all unreadable.
    fn new_segment_first(&self) -> u64 {
        self.segments.back().map_or(self.next_record, |s| self.next_record.max(s.first + 1))
    }

    /// Continue the newest segment, or start one when there is none, it is full, or it is
    /// in format version 1.
    fn open_segment(&mut self) -> std::io::Result<()> {
        let reuse = self.segments.back().is_some_and(|s| !s.v1 && s.bytes < self.segment_bytes);
        if !reuse {
            let first = self.new_segment_first();
            // Record numbers and segment names stay the same count.
            self.next_record = first;
            let path = self.dir.join(segment_name(first));
            self.segments.push_back(Segment { first, path, bytes: 0, rows: 0, v1: false });
        }
        let seg = self.segments.back().expect("just ensured");
        let mut f = OpenOptions::new().create(true).write(true).truncate(false).open(&seg.path)?;
        f.seek(SeekFrom::Start(seg.bytes))?;
        if !reuse {
            // The new file's name in its directory, durably, before any record in it counts.
            File::open(&self.dir).and_then(|d| d.sync_all()).ok();
        }
        self.file = Some(f);
        Ok(())
    }

    fn run(mut self, rx: mpsc::Receiver<Append>) {
        // Block for one append, then take every other one already waiting: they share
        // the fsync (group commit).
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            group.extend(rx.try_iter().take(4096));
            let (ok, failed) = self.write_group(group);
            for (a, e) in failed {
                let _ = a.done.send(Err(e));
            }
            let synced = match self.durability {
                Durability::Fsync if !ok.is_empty() => {
                    let r = self.file.as_ref().expect("open").sync_data().map_err(io_error);
                    self.stats.fsyncs.fetch_add(1, Relaxed);
                    r
                }
                _ => Ok(()),
            };
            match synced {
                Ok(()) => {
                    for a in ok {
                        let _ = a.done.send(Ok(()));
                    }
                }
                Err(e) => {
                    // Not known to be on disk: cut the group back and refuse it all.
                    tracing::error!("fsync of the write-ahead log failed: {e}");
                    let n: u64 = ok.iter().map(|a| (HEADER + a.bytes.len()) as u64).sum();
                    let rows: u64 = ok.iter().map(|a| a.rows).sum();
                    self.cut_back(n, rows, ok.len() as u64);
                    for a in ok {
                        let _ = a.done.send(Err(WalError::Io(e.to_string())));
                    }
                }
            }
            if self.segments.back().is_some_and(|s| s.bytes >= self.segment_bytes) {
                if let Err(e) = self.open_segment() {
                    tracing::error!("starting a new write-ahead log segment: {e}");
                }
            }
            self.prune();
            self.publish_stats();
        }
    }

    /// Write each append; a failed one is cut back so the file ends in whole records.
    fn write_group(&mut self, group: Vec<Append>) -> (Vec<Append>, Vec<(Append, WalError)>) {
        let (mut ok, mut failed) = (Vec::with_capacity(group.len()), Vec::new());
        for a in group {
            let head = header(self.next_record, &a.bytes);
            let f = self.file.as_mut().expect("open");
            let seg = self.segments.back_mut().expect("open");
            match f.write_all(&head).and_then(|()| f.write_all(&a.bytes)) {
                Ok(()) => {
                    seg.bytes += (HEADER + a.bytes.len()) as u64;
                    seg.rows += a.rows;
                    self.next_record += 1;
                    self.stats.records.fetch_add(1, Relaxed);
                    ok.push(a);
                }
                Err(e) => {
                    let start = seg.bytes;
                    if f.set_len(start).and_then(|()| f.seek(SeekFrom::Start(start)).map(|_| ())).is_err() {
                        tracing::error!("could not cut a failed write-ahead log write back; recovery will skip its bytes");
                    }
                    let e = io_error(e);
                    tracing::warn!("{e}");
                    failed.push((a, e));
                }
            }
        }
        (ok, failed)
    }

    fn cut_back(&mut self, bytes: u64, rows: u64, records: u64) {
        let seg = self.segments.back_mut().expect("open");
        seg.bytes -= bytes;
        seg.rows -= rows;
        self.next_record -= records;
        let f = self.file.as_mut().expect("open");
        let _ = f.set_len(seg.bytes).and_then(|()| f.seek(SeekFrom::Start(seg.bytes)).map(|_| ()));
    }

    /// Delete the oldest segments whose rows the replay can no longer hold.
    fn prune(&mut self) {
        loop {
            let newer: u64 = self.segments.iter().skip(1).map(|s| s.rows).sum();
            if self.segments.len() < 2 || newer < self.capacity {
                return;
            }
            let old = self.segments.pop_front().expect("two or more");
            if let Err(e) = std::fs::remove_file(&old.path) {
                tracing::warn!(segment = %old.path.display(), "could not delete an old write-ahead log segment: {e}");
            }
        }
    }

    fn publish_stats(&self) {
        self.stats.bytes.store(self.segments.iter().map(|s| s.bytes).sum(), Relaxed);
        self.stats.segments.store(self.segments.len() as u64, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shine_agent::experience::{col, encode, BatchMeta};

    const EXPECT: Expect = Expect { actions: 5, n_step: 1 };

    fn meta() -> WalMeta {
        WalMeta::new("untouchable", EXPECT)
    }

    /// An upload of `n` rows whose reward column is `tag + i`.
    fn upload(tag: u32, n: usize) -> axum::body::Bytes {
        let mut data = vec![0.0f32; n * TRANSITION_FLOATS];
        for (i, row) in data.chunks_exact_mut(TRANSITION_FLOATS).enumerate() {
            row[col::REWARD] = (tag as usize * 10_000 + i) as f32;
        }
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&tag.to_le_bytes());
        id[15] = 1;
        encode(&BatchMeta { worker_id: 1, model_version: 1, n_step: 1, upload_id: id }, &data, true).into()
    }

    fn tags(rows: &[f32]) -> Vec<u32> {
        let mut t: Vec<u32> = rows.chunks_exact(TRANSITION_FLOATS).map(|r| (r[col::REWARD] as u32) / 10_000).collect();
        t.dedup();
        t
    }

    fn write(dir: &Path, cfg: &WalConfig, capacity: usize, uploads: &[(u32, usize)]) {
        write_segments_of(dir, cfg, 64 << 20, capacity, uploads)
    }

    fn write_segments_of(dir: &Path, cfg: &WalConfig, segment_bytes: u64, capacity: usize, uploads: &[(u32, usize)]) {
        let rec = recover(dir, &meta(), capacity, EXPECT).unwrap();
        let wal = Wal::open_with(dir, cfg.durability, segment_bytes, capacity, &rec).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for &(tag, n) in uploads {
            rt.block_on(wal.append(upload(tag, n), n as u64)).unwrap();
        }
    }

    #[test]
    fn what_was_appended_comes_back_newest_capacity_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WalConfig::default();
        write(dir.path(), &cfg, 25, &[(1, 10), (2, 10), (3, 10)]);
        write(dir.path(), &cfg, 25, &[(4, 10)]);
        let rec = recover(dir.path(), &meta(), 25, EXPECT).unwrap();
        assert_eq!((rec.records, rec.transitions, rec.corrupt, rec.torn_bytes), (4, 40, 0, 0));
        assert_eq!(rec.rows.len() / TRANSITION_FLOATS, 25, "the newest capacity rows");
        assert_eq!(tags(&rec.rows), vec![2, 3, 4]);
        assert_eq!(rec.rows[col::REWARD], 20_005.0, "the oldest kept row is the 6th of upload 2");
        assert_eq!(rec.upload_ids.len(), 4);
    }

    #[test]
    fn a_torn_tail_is_cut_back_to_the_last_whole_record() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &WalConfig::default(), 100, &[(1, 5), (2, 5)]);
        let seg = list_segments(dir.path()).unwrap().pop().unwrap();
        let whole = std::fs::read(&seg).unwrap();
        // A crash in the middle of the third record: in its payload, then in its header.
        let third = upload(3, 5);
        let mut torn_record = header(2, &third).to_vec();
        torn_record.extend_from_slice(&third);
        for cut in [HEADER + third.len() / 2, HEADER - 1, 3] {
            let mut torn = whole.clone();
            torn.extend_from_slice(&torn_record[..cut]);
            std::fs::write(&seg, &torn).unwrap();
            let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
            assert_eq!((tags(&rec.rows), rec.corrupt, rec.torn_bytes), (vec![1, 2], 0, cut as u64), "torn after {cut} bytes");
            assert_eq!(std::fs::read(&seg).unwrap(), whole, "cut back to the last whole record");
        }
        // Appending after the cut gives a clean log.
        write(dir.path(), &WalConfig::default(), 100, &[(4, 5)]);
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.torn_bytes, rec.corrupt), (vec![1, 2, 4], 0, 0));
    }

    #[test]
    fn a_corrupt_record_in_the_middle_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &WalConfig::default(), 100, &[(1, 5), (2, 5), (3, 5)]);
        let seg = list_segments(dir.path()).unwrap().pop().unwrap();
        let mut bytes = std::fs::read(&seg).unwrap();
        // Flip a byte inside the second record's payload.
        let at = find(&bytes, &upload(2, 5)) + 70;
        bytes[at] ^= 0x40;
        std::fs::write(&seg, &bytes).unwrap();
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.corrupt, rec.records), (vec![1, 3], 1, 2));
    }

    /// Where `needle` starts in `hay` (the test's way to find a record without knowing
    /// the framing: its payload is the upload's bytes).
    fn find(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len()).position(|w| w == needle).expect("the upload's bytes are in the segment")
    }

    #[test]
    fn a_flipped_byte_anywhere_in_a_record_costs_that_record_only() {
        let dir = tempfile::tempdir().unwrap();
        let uploads: Vec<(u32, usize)> = (1..=10).map(|t| (t, 3 + t as usize)).collect();
        write(dir.path(), &WalConfig::default(), 1000, &uploads);
        let seg = list_segments(dir.path()).unwrap().pop().unwrap();
        let clean = std::fs::read(&seg).unwrap();
        // Upload 4's framing: every byte between upload 3's payload and its own, and a
        // few bytes of its payload.
        let (third, fourth) = (upload(3, 6), upload(4, 7));
        let framing = find(&clean, &third) + third.len()..find(&clean, &fourth);
        assert!(framing.len() >= 8, "{framing:?}");
        let payload_at = framing.end;
        let bytes = framing.clone().chain([payload_at, payload_at + 30, payload_at + fourth.len() - 1]);
        for at in bytes {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = clean.clone();
                bad[at] ^= flip;
                std::fs::write(&seg, &bad).unwrap();
                let rec = recover(dir.path(), &meta(), 1000, EXPECT).unwrap();
                let what = format!("byte {} of upload 4's record ^ {flip:#x}", at as isize - framing.start as isize);
                assert_eq!(tags(&rec.rows), vec![1, 2, 3, 5, 6, 7, 8, 9, 10], "{what}");
                assert_eq!((rec.records, rec.corrupt, rec.torn_bytes, rec.upload_ids.len()), (9, 1, 0, 9), "{what}");
            }
        }
    }

    #[test]
    fn damage_that_spans_records_counts_each_record_it_took() {
        let dir = tempfile::tempdir().unwrap();
        let uploads: Vec<(u32, usize)> = (1..=6).map(|t| (t, 5)).collect();
        write(dir.path(), &WalConfig::default(), 1000, &uploads);
        let seg = list_segments(dir.path()).unwrap().pop().unwrap();
        let mut bytes = std::fs::read(&seg).unwrap();
        // Zeros from the middle of upload 2's payload to the middle of upload 4's (a lost
        // disk block): uploads 2, 3 and 4 are gone, 1, 5 and 6 come back.
        let (from, to) = (find(&bytes, &upload(2, 5)) + 50, find(&bytes, &upload(4, 5)) + 50);
        bytes[from..to].fill(0);
        std::fs::write(&seg, &bytes).unwrap();
        let rec = recover(dir.path(), &meta(), 1000, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.corrupt, rec.torn_bytes), (vec![1, 5, 6], 3, 0));
    }

    #[test]
    fn damage_at_the_end_of_a_sealed_segment_costs_its_records_only() {
        let dir = tempfile::tempdir().unwrap();
        // Segments that roll over after their second record.
        let record = (HEADER + upload(1, 5).len()) as u64;
        let uploads: Vec<(u32, usize)> = (1..=8).map(|t| (t, 5)).collect();
        write_segments_of(dir.path(), &WalConfig::default(), 2 * record, 1000, &uploads);
        let segs = list_segments(dir.path()).unwrap();
        assert!(segs.len() >= 4, "four full segments (and perhaps the next, empty): {segs:?}");
        // The first segment's last record (upload 2): its length's top byte.
        let mut bytes = std::fs::read(&segs[0]).unwrap();
        let at = find(&bytes, &upload(2, 5)) - HEADER + 19;
        bytes[at] ^= 0x01;
        std::fs::write(&segs[0], &bytes).unwrap();
        let rec = recover(dir.path(), &meta(), 1000, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.corrupt, rec.torn_bytes), (vec![1, 3, 4, 5, 6, 7, 8], 1, 0));
        assert_eq!(std::fs::read(&segs[0]).unwrap(), bytes, "a sealed segment is never cut");
    }

    /// `uploads` framed as format version 1 did (`len, crc32, payload`), in a log whose
    /// meta.json says version 1, as today's managers find logs of earlier ones.
    fn write_v1_log(dir: &Path, uploads: &[(u32, usize)]) -> PathBuf {
        let mut old = meta();
        old.version = 1;
        std::fs::write(dir.join(META_FILE), serde_json::to_vec_pretty(&old).unwrap()).unwrap();
        let mut bytes = Vec::new();
        for &(tag, n) in uploads {
            let u = upload(tag, n);
            bytes.extend_from_slice(&(u.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32fast::hash(&u).to_le_bytes());
            bytes.extend_from_slice(&u);
        }
        let seg = dir.join(segment_name(0));
        std::fs::write(&seg, &bytes).unwrap();
        seg
    }

    #[test]
    fn a_log_in_format_version_1_still_reads_and_continues_in_version_2() {
        let dir = tempfile::tempdir().unwrap();
        let v1_seg = write_v1_log(dir.path(), &[(1, 5), (2, 5), (3, 5)]);
        let v1_bytes = std::fs::read(&v1_seg).unwrap();
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.records, rec.corrupt, rec.torn_bytes), (vec![1, 2, 3], 3, 0, 0));
        assert_eq!(rec.upload_ids.len(), 3);

        // A manager writes to it: meta.json marks where version 2 starts, the old
        // segment stays as it is, the new uploads go to a new segment.
        write(dir.path(), &WalConfig::default(), 100, &[(4, 5), (2, 5)]);
        let on_disk: WalMeta = serde_json::from_slice(&std::fs::read(dir.path().join(META_FILE)).unwrap()).unwrap();
        assert_eq!((on_disk.version, on_disk.v1_segments_before), (2, Some(3)));
        assert_eq!(std::fs::read(&v1_seg).unwrap(), v1_bytes);
        assert_eq!(list_segments(dir.path()).unwrap(), vec![v1_seg.clone(), dir.path().join(segment_name(3))]);
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.records, rec.repeats, rec.corrupt), (vec![1, 2, 3, 4], 4, 1, 0));

        // Restarted again: still read each segment in its own format, and keep appending.
        write(dir.path(), &WalConfig::default(), 100, &[(5, 5)]);
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.records, rec.corrupt, rec.torn_bytes), (vec![1, 2, 3, 4, 5], 5, 0, 0));
        assert_eq!(list_segments(dir.path()).unwrap().len(), 2);
    }

    #[test]
    fn a_version_1_log_with_a_torn_tail_is_cut_back_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let seg = write_v1_log(dir.path(), &[(1, 5), (2, 5)]);
        let whole = std::fs::metadata(&seg).unwrap().len();
        let third = upload(3, 5);
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&(third.len() as u32).to_le_bytes()).unwrap();
        f.write_all(&crc32fast::hash(&third).to_le_bytes()).unwrap();
        f.write_all(&third[..third.len() / 2]).unwrap();
        drop(f);
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.corrupt), (vec![1, 2], 0));
        assert_eq!(rec.torn_bytes, (V1_FRAME + third.len() / 2) as u64);
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), whole);
    }

    #[test]
    fn a_log_in_a_newer_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut newer = meta();
        newer.version = 3;
        std::fs::write(dir.path().join(META_FILE), serde_json::to_vec(&newer).unwrap()).unwrap();
        let err = recover(dir.path(), &meta(), 100, EXPECT).unwrap_err().to_string();
        assert!(err.contains("version 3") && err.contains("newer"), "{err}");
    }

    #[test]
    fn a_log_from_another_configuration_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &WalConfig::default(), 100, &[(1, 5)]);
        let other = WalMeta::new("fight", Expect { actions: 9, n_step: 1 });
        let err = recover(dir.path(), &other, 100, Expect { actions: 9, n_step: 1 }).unwrap_err().to_string();
        assert!(err.contains("\"untouchable\"") && err.contains("\"fight\"") && err.contains("--data-dir"), "{err}");
    }

    #[test]
    fn repeats_of_an_upload_id_are_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &WalConfig::default(), 100, &[(1, 5), (2, 5), (1, 5)]);
        let rec = recover(dir.path(), &meta(), 100, EXPECT).unwrap();
        assert_eq!((tags(&rec.rows), rec.repeats), (vec![1, 2], 1));
    }

    #[test]
    fn old_segments_go_once_newer_ones_hold_the_capacity() {
        let dir = tempfile::tempdir().unwrap();
        // Segments of 4 KiB: every few uploads start a new one.
        let uploads: Vec<(u32, usize)> = (1..=60).map(|t| (t, 2000)).collect();
        write_segments_of(dir.path(), &WalConfig::default(), 4096, 10_000, &uploads);
        let segs = list_segments(dir.path()).unwrap();
        let rec = recover(dir.path(), &meta(), 10_000, EXPECT).unwrap();
        assert!(segs.len() >= 2, "the log rolled over: {segs:?}");
        assert!(rec.transitions < 60 * 2000, "old segments were deleted ({} transitions kept)", rec.transitions);
        assert!(rec.transitions >= 10_000, "but never below the capacity");
        assert_eq!(tags(&rec.rows), (56..=60).collect::<Vec<u32>>());
    }

    #[test]
    fn with_durability_off_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &WalConfig { durability: Durability::Off, ..Default::default() }, 100, &[(1, 5)]);
        assert!(list_segments(dir.path()).unwrap().is_empty());
    }
}
