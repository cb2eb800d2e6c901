//! Upload validation over real HTTP: every malformed case gets its status and code,
//! is counted by reason, and leaves the replay unchanged.

mod common;

use common::*;
use shine_agent::experience::{col, HEADER_LEN, MAX_COUNT, TRANSITION_FLOATS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn patch(good: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut v = good.to_vec();
    v[at..at + bytes.len()].copy_from_slice(bytes);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_malformed_upload_is_rejected_with_its_status_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;

    // A good batch first: the replay then holds exactly 50.
    let (st, body) = m.upload(batch(50, 1)).await;
    assert_eq!(st, 202, "{body}");
    assert_eq!(body["accepted"], 50);
    assert_eq!(body["duplicate"], false);
    m.wait_for("the first batch in the replay", |c| c["transitions_inserted"] == 50).await;

    let good = batch(4, 2);
    let uncompressed = {
        let meta = shine_agent::experience::BatchMeta { worker_id: 1, model_version: 1, n_step: 1, upload_id: [7; 16] };
        shine_agent::experience::encode(&meta, &rows(4, 3), false)
    };
    let cell = HEADER_LEN + 4 * (TRANSITION_FLOATS + 5);
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        ("wrong magic", patch(&good, 0, b"SHXQ"), 400, "bad_magic", "magic"),
        ("wrong version", patch(&good, 4, &2u16.to_le_bytes()), 400, "bad_version", "version"),
        ("wrong dims", patch(&good, 8, &28u16.to_le_bytes()), 422, "bad_dims", "dims"),
        ("wrong n_step", patch(&good, 10, &[3]), 422, "bad_n_step", "dims"),
        ("unknown flag", patch(&good, 6, &3u16.to_le_bytes()), 400, "bad_flags", "header"),
        ("reserved byte", patch(&good, 60, &[1]), 400, "reserved_not_zero", "header"),
        ("truncated header", good[..40].to_vec(), 400, "truncated", "truncated"),
        ("empty body", Vec::new(), 400, "truncated", "truncated"),
        ("truncated payload", good[..good.len() - 8].to_vec(), 400, "payload_length", "truncated"),
        ("count mismatch", patch(&uncompressed, 12, &5u32.to_le_bytes()), 422, "count_mismatch", "count"),
        ("count zero", patch(&uncompressed, 12, &0u32.to_le_bytes()), 422, "bad_count", "count"),
        ("count over the maximum", patch(&uncompressed, 12, &(MAX_COUNT + 1).to_le_bytes()), 422, "bad_count", "count"),
        ("corrupt compression", patch(&good, HEADER_LEN + 2, &[0xFF, 0xFF, 0xFF, 0xFF]), 400, "bad_compression", "compression"),
        ("NaN", patch(&uncompressed, cell, &f32::NAN.to_le_bytes()), 422, "not_finite", "nan"),
        ("infinity", patch(&uncompressed, cell, &f32::NEG_INFINITY.to_le_bytes()), 422, "not_finite", "nan"),
        ("action out of range", patch(&uncompressed, HEADER_LEN + 4 * col::ACTION, &5.0f32.to_le_bytes()), 422, "bad_action", "values"),
        ("terminal not 0/1", patch(&uncompressed, HEADER_LEN + 4 * col::TERMINAL, &0.5f32.to_le_bytes()), 422, "bad_terminal", "values"),
    ];
    for (what, body, status, code, _) in &cases {
        let (st, err) = m.upload(body.clone()).await;
        assert_eq!((st, err["error"]["code"].as_str().unwrap_or("")), (*status, *code), "{what}: {err}");
        assert!(!err["error"]["message"].as_str().unwrap().is_empty(), "{what}: a message says why");
    }

    // Wrong or missing token, wrong content type: checked before the body is read.
    let (st, err) = m.upload_with(good.clone(), None, Some("application/octet-stream")).await;
    assert_eq!((st, err["error"]["code"].as_str().unwrap()), (401, "unauthorized"));
    let (st, _) = m.upload_with(good.clone(), Some("wrong-token"), Some("application/octet-stream")).await;
    assert_eq!(st, 401);
    let (st, _) = m.upload_with(good.clone(), Some(&format!("{TOKEN}x")), Some("application/octet-stream")).await;
    assert_eq!(st, 401, "a token with our token as prefix is still wrong");
    let (st, err) = m.upload_with(good.clone(), Some(TOKEN), Some("application/json")).await;
    assert_eq!((st, err["error"]["code"].as_str().unwrap()), (415, "unsupported_media_type"));
    let (st, _) = m.upload_with(good.clone(), Some(TOKEN), None).await;
    assert_eq!(st, 415);

    // Oversized: refused from Content-Length...
    let (st, body) = raw_upload(&m.url, Framing::DeclaredLength, (1 << 20) + 1).await;
    assert_eq!(st, 413, "{body}");
    assert!(body.contains("payload_too_large"), "{body}");
    // ...and from the bytes themselves when no length is declared (chunked).
    let (st, body) = raw_upload(&m.url, Framing::Chunked, (1 << 20) + 4096).await;
    assert_eq!(st, 413, "{body}");

    // A sentinel batch; once it is in, anything accepted before it would be too.
    let (st, _) = m.upload(batch(30, 4)).await;
    assert_eq!(st, 202);
    let c = m.wait_for("the sentinel in the replay", |c| c["transitions_inserted"].as_u64().unwrap() >= 80).await;
    // A while for anything inserted late to show (weaker on a slow machine, never wrong).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let c2 = m.current().await;
    assert_eq!(c["transitions_inserted"], 80, "rejected uploads added nothing");
    assert_eq!(c2["transitions_inserted"], 80);
    assert_eq!(c2["transitions_accepted"], 80, "the API counted only accepted transitions");

    let text = m.metrics().await;
    assert_eq!(metric(&text, "shine_transitions_accepted_total{run=\"default\"}"), Some(80.0));
    assert_eq!(metric(&text, "shine_experiences_total{run=\"default\"}"), Some(80.0), "the deprecated name still says the same");
    assert_eq!(metric(&text, "shine_transitions_inserted_total{run=\"default\"}"), Some(80.0));
    for (reason, n) in [
        ("magic", 1.0),
        ("version", 1.0),
        ("dims", 2.0),
        ("header", 2.0),
        ("truncated", 3.0),
        ("count", 3.0),
        ("nan", 2.0),
        ("values", 2.0),
        ("compression", 1.0),
        ("auth", 3.0),
        ("content_type", 2.0),
        ("oversized", 2.0),
    ] {
        assert_eq!(metric(&text, &format!("shine_uploads_rejected_total{{reason=\"{reason}\",run=\"default\"}}")), Some(n), "reason {reason}:\n{text}");
    }
    m.stop().await.unwrap();
}

/// How a raw oversized upload declares its body.
enum Framing {
    /// `Content-Length: len`, and no body sent at all: the manager must refuse from the
    /// header alone.
    DeclaredLength,
    /// Chunked, `len` zero bytes, no length declared: the manager must count the bytes.
    Chunked,
}

/// POST an oversized upload over a raw socket; the status code and the response body.
///
/// The manager answers and closes before reading everything, which the kernel may turn
/// into a reset: the response is read concurrently with the writes, so it is in hand
/// before any reset arrives, and write errors after the answer are expected.
async fn raw_upload(url: &str, framing: Framing, len: usize) -> (u16, String) {
    let addr = url.trim_start_matches("http://");
    let (mut rx, mut tx) = tokio::net::TcpStream::connect(addr).await.unwrap().into_split();
    let reader = tokio::spawn(async move {
        let mut resp = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = rx.read(&mut buf).await {
            if n == 0 {
                break;
            }
            resp.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&resp).into_owned()
    });
    let framing_header = match framing {
        Framing::DeclaredLength => format!("Content-Length: {len}"),
        Framing::Chunked => "Transfer-Encoding: chunked".to_string(),
    };
    let head = format!(
        "POST /api/v1/experience HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/octet-stream\r\n{framing_header}\r\nConnection: close\r\n\r\n"
    );
    tx.write_all(head.as_bytes()).await.unwrap();
    if let Framing::Chunked = framing {
        let chunk = vec![0u8; 64 * 1024];
        let mut sent = 0;
        while sent < len {
            let n = chunk.len().min(len - sent);
            if tx.write_all(format!("{n:x}\r\n").as_bytes()).await.is_err() || tx.write_all(&chunk[..n]).await.is_err() || tx.write_all(b"\r\n").await.is_err()
            {
                break;
            }
            sent += n;
        }
        let _ = tx.write_all(b"0\r\n\r\n").await;
    }
    let text = tokio::time::timeout(HANG, reader).await.expect("the manager answers").unwrap();
    drop(tx);
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_upload_is_accepted_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(config(dir.path())).await;
    let b = batch(20, 9);
    let (st, body) = m.upload(b.clone()).await;
    assert_eq!((st, body["accepted"].as_u64(), body["duplicate"].as_bool()), (202, Some(20), Some(false)));
    let (st, body) = m.upload(b.clone()).await;
    assert_eq!((st, body["accepted"].as_u64(), body["duplicate"].as_bool()), (200, Some(0), Some(true)));
    let (st, _) = m.upload(batch(10, 10)).await;
    assert_eq!(st, 202);
    m.wait_for("both batches", |c| c["transitions_inserted"].as_u64().unwrap() >= 30).await;
    // A while for a late insert of the repeat to show (weaker on a slow machine, never wrong).
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(m.current().await["transitions_inserted"], 30, "the repeat was not added");
    assert_eq!(metric(&m.metrics().await, "shine_uploads_duplicate_total{run=\"default\"}"), Some(1.0));
    m.stop().await.unwrap();
}
