//! The experience wire format: how a worker uploads transitions to the manager.
//!
//! One transition is the paper's 57 floats: `state (27), action, reward,
//! next state (27), terminal`. A batch is a 64-byte little-endian header followed by
//! the payload, `count x 57` f32 little-endian, optionally zstd-compressed.
//!
//! ```text
//! off size field
//!   0    4 magic          b"SHXP"
//!   4    2 version        1
//!   6    2 flags          bit 0: payload is zstd-compressed; other bits must be 0
//!   8    2 state_dim      27
//!  10    1 n_step         steps summed into each reward (1 = plain DQN)
//!  11    1 reserved       0
//!  12    4 count          transitions in the batch, 1..=MAX_COUNT
//!  16    4 worker_id      as returned by registration
//!  20    4 reserved       0
//!  24    8 model_version  the model that chose these actions
//!  32   16 upload_id      random per batch; the manager drops repeats (retries)
//!  48    4 payload_len    bytes after the header
//!  52   12 reserved       0
//!  64    . payload
//! ```
//!
//! [`decode`] validates *everything* (header, sizes, decompressed length, every float
//! finite, actions in range, terminal flags 0 or 1) before returning, so a batch is
//! either accepted whole or rejected with a [`WireError`] that says why: nothing
//! partial ever reaches the replay. Documented for people in `docs/upload-format.md`.

use crate::state::STATE_DIM;
use thiserror::Error;

pub const MAGIC: [u8; 4] = *b"SHXP";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 64;
/// Floats per transition: state, action, reward, next state, terminal.
pub const TRANSITION_FLOATS: usize = 2 * STATE_DIM + 3;
/// Largest batch accepted (about 23 MB of floats).
pub const MAX_COUNT: u32 = 100_000;
pub const FLAG_ZSTD: u16 = 1;

/// Column offsets inside one 57-float transition.
pub mod col {
    use crate::state::STATE_DIM;
    pub const STATE: usize = 0;
    pub const ACTION: usize = STATE_DIM;
    pub const REWARD: usize = STATE_DIM + 1;
    pub const NEXT_STATE: usize = STATE_DIM + 2;
    pub const TERMINAL: usize = 2 * STATE_DIM + 2;
}

/// Header fields a sender chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub worker_id: u32,
    pub model_version: u64,
    pub n_step: u8,
    pub upload_id: [u8; 16],
}

/// A validated batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub meta: BatchMeta,
    /// `count x TRANSITION_FLOATS` floats, row-major.
    pub data: Vec<f32>,
}

impl Batch {
    pub fn count(&self) -> usize {
        self.data.len() / TRANSITION_FLOATS
    }
    pub fn rows(&self) -> std::slice::ChunksExact<'_, f32> {
        self.data.chunks_exact(TRANSITION_FLOATS)
    }
}

/// Why a batch was rejected. [`WireError::reason`] is the short label used in metrics.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WireError {
    #[error("upload is {0} bytes, shorter than the {HEADER_LEN}-byte header")]
    Truncated(usize),
    #[error("bad magic {0:02x?}: not a Shine experience upload (expected \"SHXP\")")]
    BadMagic([u8; 4]),
    #[error("format version {0} is not supported (this manager speaks version {VERSION})")]
    BadVersion(u16),
    #[error("state dimension {0} does not match this manager's {STATE_DIM}")]
    BadDims(u16),
    #[error("unknown flags {0:#06x}")]
    BadFlags(u16),
    #[error("reserved header bytes must be zero")]
    Reserved,
    #[error("count {0} is outside 1..={MAX_COUNT}")]
    BadCount(u32),
    #[error("n_step {got} does not match the manager's {expected}")]
    BadNStep { got: u8, expected: u8 },
    #[error("payload_len says {declared} bytes but {actual} follow the header")]
    PayloadLength { declared: u32, actual: usize },
    #[error("payload holds {actual} bytes, count {count} needs {expected}")]
    CountMismatch { count: u32, expected: usize, actual: usize },
    #[error("payload does not decompress: {0}")]
    Compression(String),
    #[error("transition {row}, column {col}: {value} is not a finite number")]
    NotFinite { row: usize, col: usize, value: f32 },
    #[error("transition {row}: action {value} is not an integer in 0..{actions}")]
    BadAction { row: usize, value: f32, actions: usize },
    #[error("transition {row}: terminal flag {value} is not 0 or 1")]
    BadTerminal { row: usize, value: f32 },
}

impl WireError {
    /// Metric label (`shine_uploads_rejected_total{reason}`).
    pub fn reason(&self) -> &'static str {
        match self {
            WireError::Truncated(_) | WireError::PayloadLength { .. } => "truncated",
            WireError::BadMagic(_) => "magic",
            WireError::BadVersion(_) => "version",
            WireError::BadDims(_) | WireError::BadNStep { .. } => "dims",
            WireError::BadFlags(_) | WireError::Reserved => "header",
            WireError::BadCount(_) | WireError::CountMismatch { .. } => "count",
            WireError::Compression(_) => "compression",
            WireError::NotFinite { .. } => "nan",
            WireError::BadAction { .. } | WireError::BadTerminal { .. } => "values",
        }
    }
}

/// The 64-byte header: all that can be known of an upload without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub meta: BatchMeta,
    /// The payload is zstd-compressed.
    pub compressed: bool,
    /// Transitions in the batch, 1..=MAX_COUNT.
    pub count: u32,
    /// Bytes after the header.
    pub payload_len: u32,
}

/// Where the header's fields lie (the table above).
mod at {
    pub const VERSION: usize = 4;
    pub const FLAGS: usize = 6;
    pub const STATE_DIM: usize = 8;
    pub const N_STEP: usize = 10;
    pub const COUNT: usize = 12;
    pub const WORKER_ID: usize = 16;
    pub const MODEL_VERSION: usize = 24;
    pub const UPLOAD_ID: usize = 32;
    pub const PAYLOAD_LEN: usize = 48;
    /// Reserved byte ranges, all zero.
    pub const RESERVED: [std::ops::Range<usize>; 3] = [11..12, 20..24, 52..64];
}

/// Little-endian reads from a fixed header; the caller checked the length.
fn le<const N: usize>(h: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&h[at..at + N]);
    b
}

impl Header {
    /// Read and check the header at the front of `upload`: magic, version, flags,
    /// state dimension, reserved bytes and count. The payload is not looked at.
    pub fn parse(upload: &[u8]) -> Result<Header, WireError> {
        let h = upload.get(..HEADER_LEN).ok_or(WireError::Truncated(upload.len()))?;
        let magic: [u8; 4] = le(h, 0);
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = u16::from_le_bytes(le(h, at::VERSION));
        if version != VERSION {
            return Err(WireError::BadVersion(version));
        }
        let flags = u16::from_le_bytes(le(h, at::FLAGS));
        if flags & !FLAG_ZSTD != 0 {
            return Err(WireError::BadFlags(flags));
        }
        let dims = u16::from_le_bytes(le(h, at::STATE_DIM));
        if dims as usize != STATE_DIM {
            return Err(WireError::BadDims(dims));
        }
        if at::RESERVED.iter().any(|r| h[r.clone()].iter().any(|&b| b != 0)) {
            return Err(WireError::Reserved);
        }
        let count = u32::from_le_bytes(le(h, at::COUNT));
        if count == 0 || count > MAX_COUNT {
            return Err(WireError::BadCount(count));
        }
        let meta = BatchMeta {
            worker_id: u32::from_le_bytes(le(h, at::WORKER_ID)),
            model_version: u64::from_le_bytes(le(h, at::MODEL_VERSION)),
            n_step: h[at::N_STEP],
            upload_id: le(h, at::UPLOAD_ID),
        };
        Ok(Header { meta, compressed: flags & FLAG_ZSTD != 0, count, payload_len: u32::from_le_bytes(le(h, at::PAYLOAD_LEN)) })
    }

    /// The 64 header bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        let mut put = |at: usize, b: &[u8]| h[at..at + b.len()].copy_from_slice(b);
        put(0, &MAGIC);
        put(at::VERSION, &VERSION.to_le_bytes());
        put(at::FLAGS, &(if self.compressed { FLAG_ZSTD } else { 0 }).to_le_bytes());
        put(at::STATE_DIM, &(STATE_DIM as u16).to_le_bytes());
        put(at::N_STEP, &[self.meta.n_step]);
        put(at::COUNT, &self.count.to_le_bytes());
        put(at::WORKER_ID, &self.meta.worker_id.to_le_bytes());
        put(at::MODEL_VERSION, &self.meta.model_version.to_le_bytes());
        put(at::UPLOAD_ID, &self.meta.upload_id);
        put(at::PAYLOAD_LEN, &self.payload_len.to_le_bytes());
        h
    }

    /// Overwrite the worker id in an encoded upload (a worker that registered again
    /// sends its spooled batches under its new id; the upload id stays).
    pub fn set_worker_id(upload: &mut [u8], worker_id: u32) -> Result<(), WireError> {
        Header::parse(upload)?;
        upload[at::WORKER_ID..at::WORKER_ID + 4].copy_from_slice(&worker_id.to_le_bytes());
        Ok(())
    }
}

/// Encode `data` (`count x 57` floats) as one upload.
pub fn encode(meta: &BatchMeta, data: &[f32], compress: bool) -> Vec<u8> {
    assert_eq!(data.len() % TRANSITION_FLOATS, 0, "encode: data is not whole transitions");
    let count = (data.len() / TRANSITION_FLOATS) as u32;
    let mut raw = Vec::with_capacity(data.len() * 4);
    for v in data {
        raw.extend_from_slice(&v.to_le_bytes());
    }
    // Level 3: zstd's default, a good trade for floats that change slowly frame to frame.
    let payload = if compress { zstd::bulk::compress(&raw, 3).expect("zstd compression of an in-memory buffer") } else { raw };
    let header = Header { meta: *meta, compressed: compress, count, payload_len: payload.len() as u32 };
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(&payload);
    out
}

/// What the receiver requires of a batch beyond the format itself.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Actions must be integers in `0..actions`.
    pub actions: usize,
    /// Required `n_step` (the manager's setting).
    pub n_step: u8,
}

/// Validate and decode one upload completely.
pub fn decode(bytes: &[u8], expect: Expect) -> Result<Batch, WireError> {
    let header = Header::parse(bytes)?;
    let Header { meta, compressed, count, payload_len: declared } = header;
    if meta.n_step != expect.n_step {
        return Err(WireError::BadNStep { got: meta.n_step, expected: expect.n_step });
    }
    let payload = &bytes[HEADER_LEN..];
    if declared as usize != payload.len() {
        return Err(WireError::PayloadLength { declared, actual: payload.len() });
    }
    let expected = count as usize * TRANSITION_FLOATS * 4;
    let decompressed;
    let raw: &[u8] = if compressed {
        // The capacity bound makes a decompression bomb an error, not an allocation.
        decompressed = zstd::bulk::decompress(payload, expected).map_err(|e| WireError::Compression(e.to_string()))?;
        &decompressed
    } else {
        payload
    };
    if raw.len() != expected {
        return Err(WireError::CountMismatch { count, expected, actual: raw.len() });
    }
    let data: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    for (row, t) in data.chunks_exact(TRANSITION_FLOATS).enumerate() {
        if let Some((col, &value)) = t.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(WireError::NotFinite { row, col, value });
        }
        let a = t[col::ACTION];
        if a < 0.0 || a.fract() != 0.0 || a as usize >= expect.actions {
            return Err(WireError::BadAction { row, value: a, actions: expect.actions });
        }
        let term = t[col::TERMINAL];
        if term != 0.0 && term != 1.0 {
            return Err(WireError::BadTerminal { row, value: term });
        }
    }
    Ok(Batch { meta, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EXPECT: Expect = Expect { actions: 5, n_step: 1 };

    fn meta() -> BatchMeta {
        BatchMeta { worker_id: 7, model_version: 42, n_step: 1, upload_id: [9; 16] }
    }

    fn rows(n: usize) -> Vec<f32> {
        (0..n)
            .flat_map(|i| {
                let mut t = vec![0.25f32; TRANSITION_FLOATS];
                t[col::ACTION] = (i % 5) as f32;
                t[col::REWARD] = i as f32 / 60.0;
                t[col::TERMINAL] = (i % 2) as f32;
                t
            })
            .collect()
    }

    proptest! {
        #[test]
        fn round_trips(n in 1usize..200, compress in any::<bool>(), wid in any::<u32>(), mv in any::<u64>(), id in any::<[u8; 16]>()) {
            let m = BatchMeta { worker_id: wid, model_version: mv, n_step: 1, upload_id: id };
            let data = rows(n);
            let b = decode(&encode(&m, &data, compress), EXPECT).unwrap();
            prop_assert_eq!(b.meta, m);
            prop_assert_eq!(b.count(), n);
            prop_assert_eq!(b.data, data);
        }

        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode(&bytes, EXPECT);
        }

        #[test]
        fn any_flipped_header_byte_is_caught_or_harmless(at in 0usize..HEADER_LEN, bit in 0u8..8) {
            let good = encode(&meta(), &rows(3), false);
            let mut bad = good.clone();
            bad[at] ^= 1 << bit;
            match decode(&bad, EXPECT) {
                Err(_) => {}
                // Only the free-form fields may change without an error.
                Ok(b) => prop_assert!((16..20).contains(&at) || (24..48).contains(&at), "byte {} accepted: {:?}", at, b.meta),
            }
        }
    }

    #[test]
    fn the_header_alone_tells_count_and_meta_and_takes_a_new_worker_id() {
        let mut bytes = encode(&meta(), &rows(12), true);
        let h = Header::parse(&bytes[..HEADER_LEN]).unwrap();
        assert_eq!((h.meta, h.count, h.compressed, h.payload_len as usize), (meta(), 12, true, bytes.len() - HEADER_LEN));
        Header::set_worker_id(&mut bytes, 99).unwrap();
        let b = decode(&bytes, EXPECT).unwrap();
        assert_eq!(b.meta, BatchMeta { worker_id: 99, ..meta() }, "only the worker id changed");
        assert_eq!(b.data, rows(12));
        let mut short = bytes[..HEADER_LEN - 1].to_vec();
        assert_eq!(Header::set_worker_id(&mut short, 1), Err(WireError::Truncated(HEADER_LEN - 1)), "no partial write");
    }

    #[test]
    fn compressed_is_smaller_for_real_looking_data() {
        let data = rows(1000);
        assert!(encode(&meta(), &data, true).len() * 4 < encode(&meta(), &data, false).len());
    }

    #[test]
    fn each_malformed_case_has_its_own_error() {
        let good = encode(&meta(), &rows(4), false);
        let patch = |at: usize, b: &[u8]| {
            let mut v = good.clone();
            v[at..at + b.len()].copy_from_slice(b);
            v
        };
        let reason = |bytes: &[u8]| decode(bytes, EXPECT).unwrap_err().reason();
        assert_eq!(reason(&good[..10]), "truncated");
        assert_eq!(reason(&good[..good.len() - 4]), "truncated");
        assert_eq!(reason(&patch(0, b"SHXQ")), "magic");
        assert_eq!(reason(&patch(4, &2u16.to_le_bytes())), "version");
        assert_eq!(reason(&patch(8, &28u16.to_le_bytes())), "dims");
        assert_eq!(reason(&patch(12, &5u32.to_le_bytes())), "count");
        assert_eq!(reason(&patch(12, &0u32.to_le_bytes())), "count");
        assert_eq!(reason(&patch(12, &(MAX_COUNT + 1).to_le_bytes())), "count");
        assert_eq!(reason(&patch(6, &1u16.to_le_bytes())), "compression");
        let cell = HEADER_LEN + 4 * (TRANSITION_FLOATS + 3);
        assert_eq!(reason(&patch(cell, &f32::NAN.to_le_bytes())), "nan");
        assert_eq!(reason(&patch(cell, &f32::INFINITY.to_le_bytes())), "nan");
        let action = HEADER_LEN + 4 * col::ACTION;
        assert_eq!(reason(&patch(action, &5.0f32.to_le_bytes())), "values");
        assert_eq!(reason(&patch(action, &1.5f32.to_le_bytes())), "values");
        assert_eq!(reason(&patch(HEADER_LEN + 4 * col::TERMINAL, &0.5f32.to_le_bytes())), "values");
    }

    #[test]
    fn decompression_bomb_is_rejected() {
        // A payload that decompresses to far more than count says.
        let huge = vec![0u8; 10 * 1024 * 1024];
        let z = zstd::bulk::compress(&huge, 3).unwrap();
        let mut bytes = encode(&meta(), &rows(1), true);
        bytes.truncate(HEADER_LEN);
        bytes[48..52].copy_from_slice(&(z.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&z);
        assert!(decode(&bytes, EXPECT).is_err());
    }
}
