//! The live view: while a browser watches this worker on the dashboard, environment 0
//! plays at the game's real pace (60 frames per second) and every one of its frames
//! goes to the manager, which fans them out to the browsers.
//!
//! ```text
//! env thread 0 ─ each frame (paced to 60 fps) ─► LiveTap (bounded queue) ─► stream: POST /workers/{id}/live every 100 ms
//!                                                      ▲
//!   stream: GET /workers/{id}/live?wait_secs=20 (long poll) ─ watch: true ─┘  (or a heartbeat's `watch`)
//! ```
//!
//! Why pace env 0 rather than sample frames: the simulator runs hundreds of times
//! faster than real time, and a person wants to watch a match, not a blur of frames
//! sampled from many. Slowing one environment to 60 fps gives the browser every
//! consecutive frame at the game's pace with no interpolation, and costs only that
//! environment's throughput while someone watches (the others keep full speed; with
//! `--envs 1` the worker produces 60 frames per second of gameplay while watched).
//!
//! Latency: the long poll returns the moment a browser subscribes, so frames reach
//! the browser about a round trip plus one post interval (100 ms) later. When the
//! last browser leaves, the next post's answer says `watch: false` and streaming stops.
//! Nothing here blocks the game: the queue drops the oldest frames when the network is
//! slower than the game, and a failed post loses only that post's frames.

use crate::client::ApiError;
use crate::pipeline::shared::Session;
use shine_agent::protocol::{LiveBatch, LiveFrame, LivePlayer};
use shine_agent::Observation;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Game frames per second: the pace of a watched environment.
pub const GAME_FPS: f64 = 60.0;
/// How often a watched worker posts its frames.
pub const POST_EVERY: Duration = Duration::from_millis(100);
/// Frames kept when posts cannot keep up (2 s of game time); the oldest go first.
pub const QUEUE_FRAMES: usize = 120;
/// How long one long poll waits for a browser before asking again.
pub const WAIT_SECS: f64 = 20.0;
/// Posts failing in a row before the worker stops streaming (and long-polls again).
const MAX_POST_FAILURES: u32 = 20;

/// The bot's decision that the current frames play out (set by the actor).
#[derive(Debug, Clone, Default)]
pub struct LiveDecision {
    pub action: u32,
    pub q: Vec<f32>,
    pub explored: bool,
    pub model_version: u64,
    pub cpu_level: u8,
    pub eval: bool,
}

/// Shared by the actor, environment 0's thread and the streaming task.
#[derive(Default)]
pub struct LiveTap {
    watched: AtomicBool,
    frames: Mutex<VecDeque<LiveFrame>>,
    /// The decision behind the newest frames (for the batch's model and CPU level).
    meta: Mutex<LiveDecision>,
    /// A heartbeat reply said `watch: true`: stop waiting and stream.
    pub wake: Notify,
}

impl LiveTap {
    /// Whether a browser watches (env 0 is paced and recorded only then).
    pub fn watched(&self) -> bool {
        self.watched.load(Relaxed)
    }

    fn set_watched(&self, on: bool) {
        if !on {
            self.frames.lock().expect("live lock").clear();
        }
        self.watched.store(on, Relaxed);
    }

    /// Record one frame of environment 0, played under `decision`.
    pub fn push(&self, obs: &Observation, decision: &LiveDecision) {
        let frame = LiveFrame {
            frame: obs.frame,
            agent: LivePlayer::of(&obs.agent),
            opponent: LivePlayer::of(&obs.opponent),
            action: decision.action,
            q: decision.q.clone(),
            explored: decision.explored,
        };
        let mut q = self.frames.lock().expect("live lock");
        if q.len() == QUEUE_FRAMES {
            q.pop_front();
        }
        q.push_back(frame);
    }

    pub fn set_decision(&self, d: &LiveDecision) {
        *self.meta.lock().expect("live lock") = d.clone();
    }

    fn take(&self, actions: &[String]) -> LiveBatch {
        let frames: Vec<LiveFrame> = self.frames.lock().expect("live lock").drain(..).collect();
        let m = self.meta.lock().expect("live lock").clone();
        LiveBatch { actions: actions.to_vec(), model_version: m.model_version, cpu_level: m.cpu_level, eval: m.eval, frames }
    }
}

/// Keeps one environment at the game's pace: [`Pacer::frame`] sleeps until the next
/// frame is due. A pacer that fell far behind (the actor was busy, the machine
/// stalled) starts afresh instead of rushing to catch up.
pub struct Pacer {
    next: Option<Instant>,
    period: Duration,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer { next: None, period: Duration::from_secs_f64(1.0 / GAME_FPS) }
    }
}

impl Pacer {
    pub fn frame(&mut self) {
        let now = Instant::now();
        let due = match self.next {
            Some(t) if t + Duration::from_millis(250) > now => t,
            _ => now,
        };
        if due > now {
            std::thread::sleep(due - now);
        }
        self.next = Some(due + self.period);
    }
    /// Not watched any more: the next watch starts a fresh clock.
    pub fn reset(&mut self) {
        self.next = None;
    }
}

/// Stream environment 0 while someone watches, until the session's token fires.
pub async fn stream(session: Session, tap: Arc<LiveTap>, actions: Vec<String>) {
    let Session { client, identity, cancel, .. } = session;
    let mut failures = 0u32;
    loop {
        if !tap.watched() {
            let id = identity.worker_id();
            let watch = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tap.wake.notified() => true,
                r = client.live_wait(id, WAIT_SECS) => match r {
                    Ok(w) => w,
                    Err(e) => {
                        // 404: the manager forgot us; the heartbeat task registers again.
                        tracing::debug!("live long poll: {e}");
                        tokio::select! {
                            _ = cancel.cancelled() => return,
                            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                        }
                        false
                    }
                },
            };
            if watch {
                tracing::info!("a browser is watching: streaming environment 0 at 60 fps");
                failures = 0;
                tap.set_watched(true);
            }
            continue;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(POST_EVERY) => {}
        }
        let batch = tap.take(&actions);
        let answer = tokio::select! {
            _ = cancel.cancelled() => return,
            r = client.live_frames(identity.worker_id(), &batch) => r,
        };
        match answer {
            Ok(true) => failures = 0,
            Ok(false) => {
                tracing::info!("nobody watches any more: environment 0 back to full speed");
                tap.set_watched(false);
            }
            Err(e) => {
                failures += 1;
                let gone = matches!(e, ApiError::Status { status: 404, .. });
                tracing::debug!("live frames: {e}");
                if gone || failures >= MAX_POST_FAILURES {
                    tap.set_watched(false);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_holds_sixty_frames_per_second() {
        // Checked on the pacer's own schedule, not on how long this machine's sleeps
        // take: each frame is due one period after the one before (not two), unless it
        // came over 250 ms late, when the clock starts afresh from then.
        let mut p = Pacer::default();
        let t0 = Instant::now();
        p.frame();
        let mut due = p.next.expect("the next frame's time");
        for i in 1..=30 {
            p.frame();
            let next = p.next.expect("the next frame's time");
            let late_restart = next - p.period >= due + Duration::from_millis(250) && next - p.period <= Instant::now();
            assert!(next == due + p.period || late_restart, "frame {i}: due {:?} after the last, not one period", next - due);
            due = next;
        }
        // And it waits for them: 30 periods after the first frame at least (0.5 s, not
        // the microseconds the game takes). A sleep never ends early, so this holds on
        // any machine.
        let secs = t0.elapsed().as_secs_f64();
        assert!(secs >= 0.49, "{secs} s for 30 paced frames");
    }

    #[test]
    fn the_queue_keeps_the_newest_frames() {
        let tap = LiveTap::default();
        let mut obs = Observation { state: [0.0; shine_agent::STATE_DIM], frame: 0, opponent: Default::default(), agent: Default::default() };
        let d = LiveDecision { action: 2, q: vec![0.5, 1.5, 2.5], ..Default::default() };
        for f in 0..(QUEUE_FRAMES as u32 + 10) {
            obs.frame = f;
            obs.agent.action = Some(0x0E);
            tap.push(&obs, &d);
        }
        let b = tap.take(&["a".into()]);
        assert_eq!(b.frames.len(), QUEUE_FRAMES);
        assert_eq!(b.frames[0].frame, 10, "the oldest were dropped");
        assert_eq!(b.frames[0].agent.action_name, "Wait");
        assert_eq!(b.frames[0].q, vec![0.5, 1.5, 2.5]);
        assert!(tap.take(&[]).frames.is_empty(), "taken once");
    }
}
