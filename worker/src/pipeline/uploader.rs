//! Getting gameplay to the manager without losing or doubling any of it.
//!
//! ```text
//! actor ─RawBatch─► spool_batches: encode (zstd, new upload_id) ─► Spool (disk) ─► drain ─► POST /api/v1/experience
//! ```
//!
//! - Every batch goes to the disk spool first (see [`crate::pipeline::spool`]): a batch exists
//!   in exactly one place, a spool file, until the manager took it.
//! - [`drain`] sends the oldest spooled batch and deletes its file only after a 2xx.
//!   Network errors, 5xx and 429 are retried with exponential backoff and jitter
//!   (`backon`), forever: while the manager is away the spool grows, and its bound
//!   decides what is dropped (the oldest, counted and logged).
//! - A batch's `upload_id` is fixed when it is encoded and travels in the file, so a
//!   retry after a lost answer is a duplicate the manager recognises and ignores:
//!   exactly once.
//! - 404 means the manager forgot this worker (it restarted): the batch is kept,
//!   registration is renewed, and the batch is sent again under the new worker id
//!   (the upload id, and so deduplication, is unchanged).
//! - 401/403 stop the worker: the token is wrong, retrying cannot help and dropping
//!   gameplay for it would be wrong; the batches stay spooled for the next start.
//! - Any other 4xx is final: logged with the manager's message, the batch dropped and
//!   counted.

use crate::pipeline::batcher::RawBatch;
use crate::client::ApiError;
use crate::pipeline::shared::{Session, UploadStats};
use crate::pipeline::spool::{Entry, Spool};
use backon::BackoffBuilder;
use rand::Rng;
use shine_agent::experience::{encode, BatchMeta, Header};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The retry schedule: 0.5 s doubling to at most 30 s, with jitter so that a fleet
/// of workers does not come back in lockstep when the manager does; never gives up.
pub fn backoff() -> impl Iterator<Item = Duration> {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

fn update_gauges(spool: &Spool, stats: &UploadStats) {
    stats.spooled_batches.store(spool.len() as u64, Relaxed);
    stats.spooled_transitions.store(spool.transitions(), Relaxed);
}

/// Run blocking spool work off the async threads.
async fn with_spool<T: Send + 'static>(spool: &Arc<Mutex<Spool>>, f: impl FnOnce(&mut Spool) -> T + Send + 'static) -> T {
    let spool = spool.clone();
    tokio::task::spawn_blocking(move || f(&mut spool.lock().unwrap_or_else(|p| p.into_inner()))).await.expect("spool task panicked")
}

/// Encode each batch from the actor (compressed, with a fresh upload id) and spool it.
/// Returns when the actor has dropped its sender and everything is on disk.
pub async fn spool_batches(mut rx: tokio::sync::mpsc::Receiver<RawBatch>, session: Session, spool: Arc<Mutex<Spool>>, wake: Arc<Notify>) -> anyhow::Result<()> {
    let Session { identity, uploads: stats, cancel, .. } = session;
    while let Some(batch) = rx.recv().await {
        // Backpressure: the simulator plays far faster than one manager trains, and
        // the manager answers 503 when its ingest queue is full. Rather than fill the
        // spool until it drops the oldest gameplay, stop taking batches (the actor then
        // blocks on the full channel and pauses) until the backlog is sent. During
        // shutdown nothing waits: every last transition is spooled.
        while stats.spooled_batches.load(Relaxed) >= BACKLOG_PAUSE && !cancel.is_cancelled() {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                _ = cancel.cancelled() => {}
            }
        }
        let meta = BatchMeta { worker_id: identity.worker_id(), model_version: batch.model_version, n_step: batch.n_step, upload_id: rand::rng().random() };
        let stats2 = stats.clone();
        with_spool(&spool, move |s| -> anyhow::Result<()> {
            let bytes = encode(&meta, &batch.data, true);
            let dropped = s.push(&bytes, &meta.upload_id)?;
            stats2.batches_dropped.fetch_add(dropped.batches, Relaxed);
            stats2.transitions_dropped.fetch_add(dropped.transitions, Relaxed);
            update_gauges(s, &stats2);
            Ok(())
        })
        .await?;
        wake.notify_one();
    }
    Ok(())
}

/// Spooled batches at which the actor is paused until the manager catches up.
pub const BACKLOG_PAUSE: u64 = 4;

/// The most a busy manager's answers scale batches up (size and age).
pub const MAX_BATCH_SCALE: u64 = 16;
/// Uploads taken in a row after which the batches halve again.
const CALM_UPLOADS: u32 = 8;

/// The batch scale after an answer: doubled on "busy" (up to `max`, itself at most
/// [`MAX_BATCH_SCALE`]), and halved after `CALM_UPLOADS` uploads taken in a row (down
/// to 1). `calm` counts them.
pub fn next_scale(scale: u64, busy: bool, calm: &mut u32, max: u64) -> u64 {
    let scale = scale.max(1);
    if busy {
        *calm = 0;
        return (scale * 2).min(max.clamp(1, MAX_BATCH_SCALE));
    }
    *calm += 1;
    if *calm >= CALM_UPLOADS && scale > 1 {
        *calm = 0;
        return scale / 2;
    }
    scale
}

/// The most transitions a batch may hold when scaled up: [`MAX_BATCH_SCALE`] times the
/// manager's size, and never more than its ingest queue holds (`queue`), than fits its
/// `max_upload_bytes` uncompressed (zstd only shrinks these rows; 2 % spare) or than the
/// format's count. Either limit not said (0): no growth.
pub fn batch_cap(every: usize, max_upload_bytes: u64, queue: u64) -> usize {
    if max_upload_bytes == 0 || queue == 0 {
        return every;
    }
    let queue = usize::try_from(queue).unwrap_or(usize::MAX);
    let row_bytes = (shine_agent::experience::TRANSITION_FLOATS * 4) as u128;
    let fits = u128::from(max_upload_bytes.saturating_sub(shine_agent::experience::HEADER_LEN as u64)) * 98 / 100 / row_bytes;
    let fits = usize::try_from(fits).unwrap_or(usize::MAX);
    (every.saturating_mul(MAX_BATCH_SCALE as usize)).min(fits).min(queue).min(shine_agent::experience::MAX_COUNT as usize).max(every)
}

/// How long a batch waits after the manager answered 503 (busy) before it is offered again.
pub const BUSY_RETRY: Duration = Duration::from_millis(500);

/// How [`drain`] ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainMode {
    /// Keep sending and retrying until `stop` fires.
    Forever,
    /// Shutting down: send what is spooled, stop at the first failure or when empty;
    /// whatever is left stays on disk for the next start.
    Flush,
}

/// Send spooled batches, oldest first, until `stop` fires (mode `Forever`) or the
/// spool is empty or the manager fails (mode `Flush`). Returns an error only when the
/// worker must stop (the manager refuses the token).
pub async fn drain(session: Session, spool: Arc<Mutex<Spool>>, wake: Arc<Notify>, stop: CancellationToken, mode: DrainMode) -> anyhow::Result<()> {
    let Session { client, identity, uploads: stats, counters, .. } = session;
    let mut delays = backoff();
    let mut calm = 0;
    let mut rescale = |busy: bool| {
        let was = counters.batch_scale.load(Relaxed).max(1);
        let now = next_scale(was, busy, &mut calm, counters.batch_scale_max.load(Relaxed));
        if now != was {
            counters.batch_scale.store(now, Relaxed);
            tracing::info!(scale = now, "{}", if busy { "the manager is busy: larger batches" } else { "the manager keeps up: smaller batches" });
        }
    };
    loop {
        if stop.is_cancelled() {
            return Ok(());
        }
        let next = with_spool(&spool, |s| s.take_oldest()).await?;
        let Some((entry, mut bytes)) = next else {
            if mode == DrainMode::Flush {
                return Ok(());
            }
            tokio::select! {
                _ = wake.notified() => continue,
                _ = stop.cancelled() => return Ok(()),
            }
        };
        // A spool file whose header does not parse is sent as it is: the manager's 400
        // says what is wrong, and the batch is then dropped and counted.
        let _ = Header::set_worker_id(&mut bytes, identity.worker_id());
        let outcome = client.upload(bytes).await;
        let failure = match outcome {
            Ok(reply) => {
                if reply.duplicate {
                    stats.duplicates.fetch_add(1, Relaxed);
                    tracing::debug!(batch = %entry.name, "the manager already had this batch (a retry)");
                } else {
                    stats.batches_uploaded.fetch_add(1, Relaxed);
                    stats.transitions_uploaded.fetch_add(entry.transitions, Relaxed);
                }
                rescale(false);
                finish(&spool, &stats, &entry).await?;
                delays = backoff();
                continue;
            }
            Err(ApiError::Status { status: 401 | 403, message, .. }) => {
                release(&spool, &entry).await;
                anyhow::bail!(
                    "the manager refused our token ({message}): check --token / SHINE_TOKEN; {} spooled batches are kept in {}",
                    stats.spooled_batches.load(Relaxed),
                    spool.lock().unwrap_or_else(|p| p.into_inner()).dir().display()
                );
            }
            Err(e @ ApiError::Status { status: 404, .. }) => {
                identity.reregister.notify_one();
                e
            }
            // Flow control, not a failure: the trainer's queue is full (its rate limiter
            // holds uploads while the learner catches up). Offer the batch again soon,
            // with no growing backoff; meanwhile the backlog pauses the actor.
            Err(ApiError::Status { status: 503, .. }) => {
                release(&spool, &entry).await;
                stats.busy_answers.fetch_add(1, Relaxed);
                rescale(true);
                tracing::debug!(batch = %entry.name, "the manager is busy; offering the batch again shortly");
                tokio::select! {
                    _ = tokio::time::sleep(BUSY_RETRY) => {}
                    _ = stop.cancelled() => return Ok(()),
                }
                continue;
            }
            Err(e) if e.is_retryable() => e,
            Err(e) => {
                tracing::error!(batch = %entry.name, transitions = entry.transitions, "the manager rejected a batch; dropping it: {e}");
                stats.batches_rejected.fetch_add(1, Relaxed);
                stats.transitions_rejected.fetch_add(entry.transitions, Relaxed);
                finish(&spool, &stats, &entry).await?;
                continue;
            }
        };
        release(&spool, &entry).await;
        if mode == DrainMode::Flush {
            tracing::warn!("{failure}; {} batches stay spooled and are sent at the next start", stats.spooled_batches.load(Relaxed));
            return Ok(());
        }
        let delay = delays.next().unwrap_or(Duration::from_secs(30));
        tracing::warn!(retry_in_s = format!("{:.1}", delay.as_secs_f64()), spooled_batches = stats.spooled_batches.load(Relaxed), "{failure}");
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => return Ok(()),
        }
    }
}

async fn finish(spool: &Arc<Mutex<Spool>>, stats: &Arc<UploadStats>, entry: &Entry) -> anyhow::Result<()> {
    let (seq, stats) = (entry.seq, stats.clone());
    with_spool(spool, move |s| {
        let r = s.remove(seq);
        update_gauges(s, &stats);
        r
    })
    .await?;
    Ok(())
}

async fn release(spool: &Arc<Mutex<Spool>>, entry: &Entry) {
    let seq = entry.seq;
    with_spool(spool, move |s| s.release(seq)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_answers_double_the_batches_and_calm_ones_halve_them() {
        let mut calm = 0;
        let mut s = 1;
        for want in [2, 4, 8, 16, 16] {
            s = next_scale(s, true, &mut calm, 100);
            assert_eq!(s, want, "doubled, up to 16 whatever the cap allows");
        }
        for _ in 0..7 {
            s = next_scale(s, false, &mut calm, 100);
        }
        assert_eq!(s, 16, "seven uploads taken: not yet");
        s = next_scale(s, false, &mut calm, 100);
        assert_eq!(s, 8, "the eighth halves it");
        s = next_scale(s, true, &mut calm, 100);
        assert_eq!((s, calm), (16, 0), "busy again: doubled, the calm count starts over");
        let mut c = 0;
        assert_eq!(next_scale(1, false, &mut c, 100), 1, "never below 1");
        // A cap of 4 times the size: the scale stops at 4.
        let (mut s, mut c) = (1, 0);
        for _ in 0..5 {
            s = next_scale(s, true, &mut c, 4);
        }
        assert_eq!(s, 4);
        assert_eq!(next_scale(1, true, &mut c, 1), 1, "no room to grow: stays 1");
    }

    #[test]
    fn batches_grow_only_as_far_as_the_manager_takes() {
        // The default 32 MiB and queue: 16 times 2,000 (32,000 rows of 228 bytes, 7.3 MB).
        assert_eq!(batch_cap(2000, 32 << 20, 200_000), 32_000);
        // 1 MiB: 4,502 rows fit (98 % of it, less the header).
        assert_eq!(batch_cap(2000, 1 << 20, 200_000), ((1u64 << 20) - 64) as usize * 98 / 100 / 228);
        // A queue of four uploads: four uploads' worth at most.
        assert_eq!(batch_cap(1000, 32 << 20, 4000), 4000);
        // Not said: no growth. Never below the size asked, never past the format.
        assert_eq!(batch_cap(2000, 0, 200_000), 2000);
        assert_eq!(batch_cap(2000, 32 << 20, 0), 2000);
        assert_eq!(batch_cap(2000, 1000, 200_000), 2000);
        assert_eq!(batch_cap(2000, 32 << 20, 100), 2000);
        assert_eq!(batch_cap(50_000, u64::MAX, u64::MAX), shine_agent::experience::MAX_COUNT as usize);
    }
}
