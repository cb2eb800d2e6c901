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
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Batches a browser may fall behind before it skips ahead (~3 s at 10 batches/s).
pub const BACKLOG: usize = 32;

/// One player in a live frame.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LivePlayer {
    pub x: f32,
    pub y: f32,
    /// +1 facing right, -1 facing left.
    pub facing: f32,
    /// Melee's action-state id (`None`: no fighter, e.g. between stocks).
    pub action: Option<u32>,
    /// `shine_bridge::melee::action_name` of it.
    #[serde(default)]
    pub action_name: String,
    pub percent: f32,
    pub stocks: u8,
}

/// One game frame of the watched environment, with the bot's decision in force.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveFrame {
    /// The game's frame counter.
    pub frame: u32,
    pub agent: LivePlayer,
    pub opponent: LivePlayer,
    /// The macro-action the bot chose (index into the batch's `actions`).
    pub action: u32,
    /// Q-values of every action for the state it chose from (sent for exploratory
    /// random actions too).
    pub q: Vec<f32>,
    /// The action was a random (epsilon) one, not the argmax.
    #[serde(default)]
    pub explored: bool,
}

/// What a worker posts: `POST /api/v1/workers/{id}/live`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveBatch {
    /// Names of the action set's macro-actions, in index order.
    #[serde(default)]
    pub actions: Vec<String>,
    /// The model playing, the episode's opponent level, and whether it is evaluation.
    #[serde(default)]
    pub model_version: u64,
    #[serde(default)]
    pub cpu_level: u8,
    #[serde(default)]
    pub eval: bool,
    /// Consecutive frames, oldest first.
    pub frames: Vec<LiveFrame>,
}

/// Most frames in one post (10 s of game time; a worker sends ~6).
pub const MAX_FRAMES: usize = 600;
/// Most actions (and Q-values) a frame may carry.
pub const MAX_ACTIONS: usize = 64;

impl LiveBatch {
    /// Bounds a browser can rely on; `Err` names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.frames.len() > MAX_FRAMES {
            return Err(format!("{} frames in one post; at most {MAX_FRAMES}", self.frames.len()));
        }
        if self.actions.len() > MAX_ACTIONS || self.actions.iter().any(|a| a.len() > 64) {
            return Err(format!("at most {MAX_ACTIONS} action names of at most 64 bytes"));
        }
        for (i, f) in self.frames.iter().enumerate() {
            if f.q.len() > MAX_ACTIONS {
                return Err(format!("frame {i}: {} Q-values; at most {MAX_ACTIONS}", f.q.len()));
            }
            let numbers = [f.agent.x, f.agent.y, f.agent.facing, f.agent.percent, f.opponent.x, f.opponent.y, f.opponent.facing, f.opponent.percent];
            if numbers.iter().chain(&f.q).any(|v| !v.is_finite()) {
                return Err(format!("frame {i}: a number is not finite"));
            }
            if f.agent.action_name.len() > 64 || f.opponent.action_name.len() > 64 {
                return Err(format!("frame {i}: an action name is longer than 64 bytes"));
            }
        }
        Ok(())
    }
}

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

    #[tokio::test]
    async fn watchers_are_counted_until_the_subscription_drops() {
        let hub = LiveHub::default();
        assert!(!hub.wait_watched(7, Duration::from_millis(20)).await, "nobody watches yet");
        let waiter = {
            let hub = Arc::new(hub);
            let h2 = hub.clone();
            let w = tokio::spawn(async move { h2.wait_watched(7, Duration::from_secs(10)).await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            let sub = hub.subscribe(7);
            assert!(w.await.unwrap(), "the long poll wakes when a browser arrives");
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

    #[test]
    fn batches_out_of_bounds_are_refused() {
        let mut b = LiveBatch { frames: vec![LiveFrame { q: vec![1.0; 5], ..Default::default() }], ..Default::default() };
        b.validate().unwrap();
        b.frames[0].q[2] = f32::NAN;
        assert!(b.validate().unwrap_err().contains("not finite"));
        b.frames = vec![LiveFrame::default(); MAX_FRAMES + 1];
        assert!(b.validate().unwrap_err().contains("frames"));
    }
}
