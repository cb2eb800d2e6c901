//! `--envs auto` on a fake slow machine: each environment's frame costs 2 ms while at
//! most `knee` environments run, and more beyond (a machine with `knee` cores): useful
//! frames/s peak at `knee` environments. The actor must settle there, and move when the
//! machine changes. (The cost is a sleep, so the figures hold on a loaded CI machine.)

mod common;

use common::harness::{Harness, Output};
use common::{actor_config, model, Scripted, HANG};
use shine_bridge::{Emulator, MatchSetup, Pad, RamView};
use shine_worker::pipeline::actor::{ActorConfig, Model};
use shine_worker::pipeline::shared::ActorCounters;
use shine_worker::pipeline::tuner::TunerConfig;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many slow environments exist, and the machine's knee.
#[derive(Default)]
struct Machine {
    running: AtomicUsize,
    knee: AtomicUsize,
}

struct Slow {
    game: Scripted,
    machine: Arc<Machine>,
}

impl Drop for Slow {
    fn drop(&mut self) {
        self.machine.running.fetch_sub(1, Relaxed);
    }
}

/// No seat for a policy on the other side (self-play is the simulator's).
impl shine_worker::games::duel::Seats for Slow {}

impl Emulator for Slow {
    type Error = std::convert::Infallible;
    fn reset(&mut self, setup: MatchSetup, seed: u64) -> Result<(), Self::Error> {
        self.game.reset(setup, seed)
    }
    fn step(&mut self, pad: &Pad) -> Result<(), Self::Error> {
        let (n, knee) = (self.machine.running.load(Relaxed) as f64, self.machine.knee.load(Relaxed) as f64);
        std::thread::sleep(Duration::from_secs_f64(0.002 * (n / knee).max(1.0).powi(2)));
        self.game.step(pad)
    }
    fn ram(&self) -> RamView<'_> {
        self.game.ram()
    }
    fn setup(&self) -> MatchSetup {
        self.game.setup()
    }
}

/// Wait until the count has been `n` for `hold` (or panic after [`HANG`]), watching
/// every count seen.
fn settles_on(counters: &ActorCounters, n: u64, hold: Duration, seen: &mut Vec<u64>) {
    let (start, mut since) = (Instant::now(), None);
    loop {
        let now_n = counters.envs.load(Relaxed);
        if seen.last() != Some(&now_n) {
            seen.push(now_n);
        }
        since = if now_n == n { since.or(Some(Instant::now())) } else { None };
        if since.is_some_and(|t| t.elapsed() >= hold) {
            return;
        }
        assert!(start.elapsed() < HANG, "never settled on {n}: counts seen {seen:?}; reason: {}", counters.envs_reason());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn envs_auto_settles_on_the_machines_best_count_and_follows_a_change() {
    let machine = Arc::new(Machine { running: AtomicUsize::new(0), knee: AtomicUsize::new(3) });
    let cfg = ActorConfig {
        cpu_level_top_share: 1.0,
        batch_transitions: 500,
        batch_secs: 1.0,
        auto: Some(TunerConfig { max: 8, window: Duration::from_millis(400), gain: 0.05, max_skipped: 0.02, recheck: Duration::from_secs(3) }),
        ..actor_config(1, 5)
    };
    let make = {
        let m = machine.clone();
        move |_: usize| {
            m.running.fetch_add(1, Relaxed);
            Ok(Slow { game: Scripted::new(MatchSetup::default(), |_| None), machine: m.clone() })
        }
    };
    let actor = Harness::start(cfg, make, Model { net: model(1), version: 1 }, 0.3, Output::Consumed);
    let counters = actor.counters.clone();
    let mut seen = vec![];
    // A 3-core machine: 3 environments, having tried 4 and found it no better.
    settles_on(&counters, 3, Duration::from_secs(2), &mut seen);
    assert!(seen.contains(&4) || counters.envs_reason().contains("back to 3"), "{seen:?}");
    assert_eq!(seen.iter().find(|&&n| n > 0), Some(&1), "it starts small: {seen:?}");
    // The machine gets 5 cores: a re-check finds it and the count follows.
    machine.knee.store(5, Relaxed);
    settles_on(&counters, 5, Duration::from_secs(2), &mut seen);
    assert!(counters.envs_reason().contains('5'), "{}", counters.envs_reason());
    actor.stop();
    // Retired environments stopped: only the 5 in use remain.
    assert_eq!(machine.running.load(Relaxed), 0, "every environment stopped with the actor");
}
