//! Live matches: the frames a watched worker posts, fanned out to the browsers that
//! watch it.
//!
//! ```text
//! browser ─WS /live/{w}─► subscribe: watchers(w) += 1 ──► heartbeat reply / long poll: watch = true
//! worker w ─POST /workers/{w}/live (a batch every ~100 ms)─► publish ─► broadcast(w) ─► every browser of w
//! ```
//!
//! One [`Channel`] per worker: a tokio `broadcast` of ready-to-send JSON text (each
//! batch is serialised once, whatever the number of browsers) and a `watch` of the
//! number of browsers. `broadcast` is the right tool because it never blocks the
//! sender: a browser that falls more than [`BACKLOG`] batches behind loses the oldest
//! (its receiver reports `Lagged`, and it skips ahead), so a slow browser can never
//! slow a worker or the other browsers. The watcher count is a `watch` channel so the
//! worker's long poll (`GET /workers/{w}/live`) wakes the moment a browser arrives.

use axum::extract::ws::Utf8Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Batches a browser may fall behind before it skips ahead (~3 s at 10 batches/s).
pub const BACKLOG: usize = 32;

/// The fan-out of one worker's live frames.
struct Channel {
    frames: broadcast::Sender<Utf8Bytes>,
    watchers: watch::Sender<usize>,
}

/// Every worker's channel. A std `Mutex`: held only to find or make a channel.
#[derive(Default)]
pub struct LiveHub {
    channels: Mutex<HashMap<u32, Arc<Channel>>>,
}

/// A browser's view of one worker: frames until dropped; dropping it counts the
/// browser out (so a closed tab stops the worker's stream within one post).
pub struct Subscription {
    pub frames: broadcast::Receiver<Utf8Bytes>,
    channel: Arc<Channel>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.channel.watchers.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl LiveHub {
    fn channel(&self, worker: u32) -> Arc<Channel> {
        self.channels
            .lock()
            .expect("live lock")
            .entry(worker)
            .or_insert_with(|| Arc::new(Channel { frames: broadcast::channel(BACKLOG).0, watchers: watch::channel(0).0 }))
            .clone()
    }

    /// Start watching `worker`.
    pub fn subscribe(&self, worker: u32) -> Subscription {
        let channel = self.channel(worker);
        let frames = channel.frames.subscribe();
        channel.watchers.send_modify(|n| *n += 1);
        Subscription { frames, channel }
    }

    /// Browsers watching `worker` now.
    pub fn watchers(&self, worker: u32) -> usize {
        self.channels.lock().expect("live lock").get(&worker).map_or(0, |c| *c.watchers.borrow())
    }

    /// Send one serialised batch to `worker`'s browsers; never waits. Returns whether
    /// anyone is watching (the worker stops streaming when not).
    pub fn publish(&self, worker: u32, text: Utf8Bytes) -> bool {
        let channel = self.channel(worker);
        // An error only means no receiver right now: nothing to do.
        let _ = channel.frames.send(text);
        let watched = *channel.watchers.borrow() > 0;
        watched
    }

    /// Wait up to `timeout` for a browser to watch `worker`; true as soon as one does.
    pub async fn wait_watched(&self, worker: u32, timeout: Duration) -> bool {
        let mut rx = self.channel(worker).watchers.subscribe();
        let watched = matches!(tokio::time::timeout(timeout, rx.wait_for(|n| *n > 0)).await, Ok(Ok(_)));
        watched
    }

    /// Forget the channels of workers that are gone and that nobody watches (called by
    /// the stats sampler, so the map holds only live workers however many come and go).
    pub fn retain_workers(&self, live: impl Fn(u32) -> bool) {
        self.channels.lock().expect("live lock").retain(|&id, c| live(id) || *c.watchers.borrow() > 0 || c.watchers.receiver_count() > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Paused time: the timeouts below run on tokio's clock, which advances only when
    // every task waits, so the test is exact and takes no wall time.
    #[tokio::test(start_paused = true)]
    async fn watchers_are_counted_until_the_subscription_drops() {
        let hub = LiveHub::default();
        let before = tokio::time::Instant::now();
        assert!(!hub.wait_watched(7, Duration::from_millis(20)).await, "nobody watches yet");
        assert_eq!(before.elapsed(), Duration::from_millis(20), "the long poll times out at its timeout, no sooner");
        let waiter = {
            let hub = Arc::new(hub);
            let h2 = hub.clone();
            let w = tokio::spawn(async move { h2.wait_watched(7, Duration::from_secs(10)).await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            let arrived = tokio::time::Instant::now();
            let sub = hub.subscribe(7);
            assert!(w.await.unwrap(), "the long poll wakes when a browser arrives");
            assert_eq!(arrived.elapsed(), Duration::ZERO, "at once, not at its 10 s timeout");
            assert_eq!(hub.watchers(7), 1);
            assert!(hub.publish(7, "x".into()));
            drop(sub);
            assert_eq!(hub.watchers(7), 0);
            assert!(!hub.publish(7, "y".into()), "nobody left: the worker is told to stop");
            hub
        };
        assert_eq!(waiter.watchers(8), 0);
    }

    #[tokio::test]
    async fn a_slow_browser_skips_ahead_and_never_blocks_the_worker() {
        let hub = LiveHub::default();
        let mut slow = hub.subscribe(1);
        // Far more than the backlog: publish must return at once every time.
        for i in 0..(BACKLOG * 4) {
            hub.publish(1, format!("{i}").into());
        }
        match slow.frames.recv().await {
            Err(broadcast::error::RecvError::Lagged(n)) => assert_eq!(n as usize, BACKLOG * 3),
            other => panic!("expected a lag report, got {other:?}"),
        }
        let next = slow.frames.recv().await.unwrap();
        assert_eq!(next.as_str(), format!("{}", BACKLOG * 3), "resumes at the oldest batch still held");
    }
}
