//! `--envs auto`: the worker finds, while it runs, how many environments give the most
//! useful frames per second on its machine, in the spirit of GA3C's dynamic adjustment
//! of predictors and trainers (seed `003`): measure, change one step, keep the change
//! only if the gain is real.
//!
//! Useful frames are frames of play the bot decided; frames the emulator ran without a
//! decision (skipped, Dolphin) are not, and a share of them above
//! [`TunerConfig::max_skipped`] is a reason to back off on its own. The search:
//!
//! 1. start with one environment;
//! 2. every window, measure useful frames/s (the first window after a change only
//!    settles: new emulators boot, retired ones finish);
//! 3. doubling: while doubling the count gives more than [`TunerConfig::gain`] over
//!    the count before, double again (big steps see past the measurement's noise);
//! 4. stepping: from the best count so far, one more; while that gains, one more
//!    again; when it does not, one fewer instead, the same way; then hold the best;
//! 5. holding: every [`TunerConfig::recheck`], step again from the count held (the
//!    machine, the backend or the manager may have changed);
//! 6. at any time, too many skipped frames take one environment away and hold.
//!
//! Every change comes with its reason in words, for the log, the heartbeat, the
//! manager's /metrics and the dashboard.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunerConfig {
    /// Never more environments than this.
    pub max: usize,
    /// How long each measurement runs.
    pub window: Duration,
    /// The relative gain in useful frames/s that makes one more environment worth it.
    pub gain: f64,
    /// Share of skipped frames above which one environment is taken away.
    pub max_skipped: f64,
    /// How long the count holds before one more is tried again.
    pub recheck: Duration,
}

impl TunerConfig {
    /// For a worker: ten-second windows, a 5 % gain, 2 % skipped frames, a re-check
    /// every five minutes, at most four environments per core.
    pub fn for_machine() -> TunerConfig {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        TunerConfig { max: 4 * cores, window: Duration::from_secs(10), gain: 0.05, max_skipped: 0.02, recheck: Duration::from_secs(300) }
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Doubling the count; `prev` is the count before and its useful frames/s.
    Double { prev: Option<(usize, f64)> },
    /// One at a time from `base` (the best so far and its useful frames/s) in `dir`;
    /// `turned`: the other direction was tried already.
    Step { base: (usize, f64), dir: i64, turned: bool },
    /// Settled on the count since `since`.
    Hold { since: Instant },
}

/// The search's state. Feed it the actor's counters; it says when to change the count.
#[derive(Debug, Clone)]
pub struct Tuner {
    cfg: TunerConfig,
    envs: usize,
    phase: Phase,
    window_start: Instant,
    frames0: u64,
    skipped0: u64,
    /// The next window only settles (the count just changed).
    settling: bool,
    reason: String,
    /// Bumped at every new reason, so a reader can tell it changed without comparing.
    revision: u64,
}

impl Tuner {
    pub fn new(cfg: TunerConfig, now: Instant) -> Tuner {
        Tuner {
            cfg,
            envs: 1,
            phase: Phase::Double { prev: None },
            window_start: now,
            frames0: 0,
            skipped0: 0,
            settling: true,
            reason: "starting with 1 environment".into(),
            revision: 0,
        }
    }

    pub fn envs(&self) -> usize {
        self.envs
    }
    /// Why the count is what it is, in words.
    pub fn reason(&self) -> &str {
        &self.reason
    }
    /// Changes whenever [`Tuner::reason`] does.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The actor's running totals at `now`: frames played on the bot's decisions and
    /// frames skipped. Returns the new count when it should change.
    pub fn observe(&mut self, frames: u64, skipped: u64, now: Instant) -> Option<usize> {
        let dt = now.saturating_duration_since(self.window_start);
        if dt < self.cfg.window {
            return None;
        }
        let (df, ds) = (frames.saturating_sub(self.frames0), skipped.saturating_sub(self.skipped0));
        (self.window_start, self.frames0, self.skipped0) = (now, frames, skipped);
        if std::mem::take(&mut self.settling) {
            return None;
        }
        let useful = df as f64 / dt.as_secs_f64();
        let skipped_share = if df + ds == 0 { 0.0 } else { ds as f64 / (df + ds) as f64 };
        let n = self.envs;
        if skipped_share > self.cfg.max_skipped && n > 1 {
            self.phase = Phase::Hold { since: now };
            return self.set(n - 1, format!("{:.1} % of frames skipped with {n}: back to {}", 100.0 * skipped_share, n - 1));
        }
        let gain = |base: f64| if base > 0.0 { useful / base - 1.0 } else { f64::INFINITY };
        let said = |base: Option<(usize, f64)>| match base {
            None => format!("{n} gave {useful:.0} useful frames/s"),
            Some((b, u)) => format!("{n} gave {useful:.0} useful frames/s, {:+.0} % over {b} ({u:.0})", 100.0 * gain(u)),
        };
        match self.phase {
            Phase::Double { prev } => match prev {
                Some(base) if gain(base.1) <= self.cfg.gain => {
                    // Doubling went too far: step from the best count instead.
                    self.step_from(base, 1, false, now, format!("{}: not worth it", said(prev)))
                }
                _ if n >= self.cfg.max => self.hold(now, format!("{}; {n} is the most allowed", said(prev))),
                _ => {
                    self.phase = Phase::Double { prev: Some((n, useful)) };
                    let next = (2 * n).min(self.cfg.max);
                    self.set(next, format!("{}: trying {next}", said(prev)))
                }
            },
            Phase::Step { base, dir, turned } => {
                if gain(base.1) > self.cfg.gain {
                    self.step_from((n, useful), dir, turned, now, said(Some(base)))
                } else if !turned {
                    self.step_from(base, -dir, true, now, format!("{}: not worth it", said(Some(base))))
                } else {
                    let b = base.0;
                    let out = self.set(b, format!("{}: not worth it, back to {b}", said(Some(base))));
                    self.phase = Phase::Hold { since: now };
                    out
                }
            }
            Phase::Hold { since } if now.saturating_duration_since(since) >= self.cfg.recheck => {
                self.step_from((n, useful), 1, false, now, format!("re-check: {n} gives {useful:.0} useful frames/s"))
            }
            Phase::Hold { .. } => None,
        }
    }

    /// From `base`, try one step in `dir` (the other way at a bound; hold when neither
    /// is possible).
    fn step_from(&mut self, base: (usize, f64), dir: i64, turned: bool, now: Instant, said: String) -> Option<usize> {
        let next = base.0 as i64 + dir;
        if next >= 1 && next as usize <= self.cfg.max {
            self.phase = Phase::Step { base, dir, turned };
            return self.set(next as usize, format!("{said}: trying {next}"));
        }
        if !turned {
            return self.step_from(base, -dir, true, now, said);
        }
        let b = base.0;
        let out = self.set(b, format!("{said}; holding {b}"));
        self.phase = Phase::Hold { since: now };
        out
    }

    /// Hold the current count.
    fn hold(&mut self, now: Instant, reason: String) -> Option<usize> {
        self.phase = Phase::Hold { since: now };
        self.reason = reason;
        self.revision += 1;
        None
    }

    fn set(&mut self, n: usize, reason: String) -> Option<usize> {
        self.reason = reason;
        self.revision += 1;
        self.settling = true;
        (n != self.envs).then(|| {
            self.envs = n;
            n
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive a tuner against a machine whose useful frames/s for n environments is
    /// `fps(n)` (skipped: `skip(n)` of them), one window at a time; the counts it ran.
    fn drive(t: &mut Tuner, windows: usize, start: Instant, fps: impl Fn(usize) -> f64, skip: impl Fn(usize) -> f64) -> Vec<usize> {
        let (mut frames, mut skipped, mut now, mut seen) = (0u64, 0u64, start, vec![]);
        for _ in 0..windows {
            let n = t.envs();
            now += t.cfg.window;
            frames += (fps(n) * t.cfg.window.as_secs_f64()) as u64;
            skipped += (skip(n) * t.cfg.window.as_secs_f64()) as u64;
            t.observe(frames, skipped, now);
            seen.push(t.envs());
        }
        seen
    }

    fn cfg() -> TunerConfig {
        TunerConfig { max: 16, window: Duration::from_secs(1), gain: 0.05, max_skipped: 0.02, recheck: Duration::from_secs(20) }
    }

    /// 1000 frames/s per environment up to `knee`, then each one more costs.
    fn machine(knee: usize) -> impl Fn(usize) -> f64 {
        move |n| if n <= knee { 1000.0 * n as f64 } else { 1000.0 * knee as f64 * (knee as f64 / n as f64) }
    }

    #[test]
    fn doubles_then_steps_to_the_best_count_and_holds_there() {
        let t0 = Instant::now();
        let mut t = Tuner::new(cfg(), t0);
        let seen = drive(&mut t, 25, t0, machine(3), |_| 0.0);
        assert_eq!(t.envs(), 3, "{seen:?}");
        // 1, 2, 4 (still better than 2), 8 (worse): then 5 (worse than 4), 3 (better),
        // 2 (worse): back to 3.
        let changes: Vec<usize> = seen.windows(2).filter(|w| w[0] != w[1]).map(|w| w[1]).collect();
        assert_eq!(changes, [2, 4, 8, 5, 3, 2, 3], "{seen:?}");
        assert!(seen[18..].iter().all(|&n| n == 3), "holds: {seen:?}");
        assert!(t.reason().contains("back to 3"), "{}", t.reason());
    }

    #[test]
    fn a_machine_that_keeps_gaining_gets_the_ceiling_by_doubling() {
        let t0 = Instant::now();
        let mut t = Tuner::new(TunerConfig { max: 8, ..cfg() }, t0);
        // Each doubling gains 20 %: steps of one (about 5 %) would stop early on noise.
        let seen = drive(&mut t, 12, t0, |n| 1000.0 * 1.2f64.powf((n as f64).log2()), |_| 0.0);
        assert_eq!(t.envs(), 8, "{seen:?}");
        assert!(t.reason().contains("most allowed"), "{}", t.reason());
    }

    #[test]
    fn a_recheck_finds_a_machine_that_got_faster() {
        let t0 = Instant::now();
        let mut t = Tuner::new(cfg(), t0);
        drive(&mut t, 15, t0, machine(3), |_| 0.0);
        // Later the machine allows 6 (another backend, a quieter neighbour).
        let seen = drive(&mut t, 60, t0 + Duration::from_secs(15), machine(6), |_| 0.0);
        assert_eq!(t.envs(), 6, "{seen:?}");
    }

    #[test]
    fn skipped_frames_take_an_environment_away() {
        let t0 = Instant::now();
        let mut t = Tuner::new(cfg(), t0);
        // Frames/s would keep rising, but from 4 on the emulators skip 10 % of frames.
        let seen = drive(&mut t, 20, t0, machine(8), |n| if n >= 4 { 100.0 * n as f64 } else { 0.0 });
        assert_eq!(t.envs(), 3, "{seen:?}");
        assert!(t.reason().contains("skipped"), "{}", t.reason());
    }

    #[test]
    fn never_past_the_ceiling() {
        let t0 = Instant::now();
        let mut t = Tuner::new(TunerConfig { max: 2, ..cfg() }, t0);
        let seen = drive(&mut t, 20, t0, machine(10), |_| 0.0);
        assert!(seen.iter().all(|&n| n <= 2), "{seen:?}");
        assert_eq!(t.envs(), 2);
        assert!(t.reason().contains("most allowed"), "{}", t.reason());
    }
}
