//! `--envs auto` against fixed counts: the actor (the real one, with a random-weight
//! model, batches drained as the uploader would) plays the simulator, then the Dolphin
//! backend against `shine-dolphin-peer` in lock-step (a Slippi-style Dolphin that plays
//! the embedded simulator), with 1, 2, 4 and 8 environments and with auto; useful
//! frames/s (frames the bot decided) and skipped frames over the measured part.
//!
//!     cargo build --release -p shine-bridge --bin shine-dolphin-peer
//!     cargo run --release -p shine-worker --example envs_bench [SECONDS] [sim|peer|both]
//!
//! Fixed counts: SECONDS of warm-up, then SECONDS measured. Auto: the worker's own
//! search (10-second windows; no re-check) runs for 15 x SECONDS, then SECONDS
//! measured (the count it holds then).

#[path = "../tests/common/mod.rs"]
mod common;

use common::harness::{Harness, Output};
use common::{actor_config, model};
use shine_bridge::dolphin::{Dolphin, DolphinConfig};
use shine_bridge::sim::Sim;
use shine_bridge::{Emulator, MatchSetup};
use shine_worker::pipeline::actor::{ActorConfig, Model};
use shine_worker::pipeline::shared::ActorCounters;
use shine_worker::pipeline::tuner::TunerConfig;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

struct Outcome {
    useful_fps: f64,
    skipped: u64,
    envs: u64,
}

/// Run the actor with `make` for `warm` then `measure`; the measured part's figures.
fn run<E, F>(envs: Option<usize>, make: F, warm: Duration, measure: Duration) -> Outcome
where
    E: Emulator + shine_worker::games::duel::Seats,
    F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    let cfg = ActorConfig {
        n_step: 5,
        batch_secs: 2.0,
        auto: envs.is_none().then(|| TunerConfig { recheck: Duration::from_secs(3600), ..TunerConfig::for_machine() }),
        ..actor_config(envs.unwrap_or(1), 1)
    };
    let actor = Harness::start(cfg, make, Model { net: model(1), version: 1 }, 0.1, Output::Consumed);
    let counters = &actor.counters;
    std::thread::sleep(warm);
    let (f0, s0, t0) = (counters.frames.load(Relaxed), counters.skipped_frames.load(Relaxed), Instant::now());
    std::thread::sleep(measure);
    let (f1, s1, dt) = (counters.frames.load(Relaxed), counters.skipped_frames.load(Relaxed), t0.elapsed());
    let envs = counters.envs.load(Relaxed);
    if envs_is_auto(counters) {
        eprintln!("    auto: {} environments ({})", envs, counters.envs_reason());
    }
    actor.stop();
    Outcome { useful_fps: (f1 - f0) as f64 / dt.as_secs_f64(), skipped: s1 - s0, envs }
}

fn envs_is_auto(c: &ActorCounters) -> bool {
    c.envs_auto.load(Relaxed)
}

fn table<E, F>(name: &str, secs: u64, make: impl Fn() -> F)
where
    E: Emulator + shine_worker::games::duel::Seats,
    F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
{
    let s = Duration::from_secs(secs);
    println!("{name}: useful frames/s (frames the bot decided) and skipped frames, {secs} s measured each");
    println!("{:>8} {:>16} {:>10} {:>6}", "envs", "useful frames/s", "skipped", "count");
    let mut best: f64 = 0.0;
    for n in [1usize, 2, 4, 8] {
        let o = run(Some(n), make(), s, s);
        println!("{:>8} {:>16.0} {:>10} {:>6}", n, o.useful_fps, o.skipped, o.envs);
        best = best.max(o.useful_fps);
    }
    let o = run(None, make(), s * 15, s);
    println!(
        "{:>8} {:>16.0} {:>10} {:>6}   ({:+.1} % against the best fixed count)",
        "auto",
        o.useful_fps,
        o.skipped,
        o.envs,
        100.0 * (o.useful_fps / best - 1.0)
    );
}

fn main() {
    let secs: u64 = std::env::args().nth(1).map_or(Ok(10), |s| s.parse()).expect("SECONDS must be a whole number");
    let which = std::env::args().nth(2).unwrap_or_else(|| "both".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("machine: {cores} cores available; auto's ceiling: {} environments", 4 * cores);
    if which != "peer" {
        table("simulator", secs, || |_i: usize| Ok(Sim::new(MatchSetup::default(), 1)));
    }
    if which != "sim" {
        let peer = PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into())).join("release/shine-dolphin-peer");
        assert!(peer.is_file(), "{} is missing: cargo build --release -p shine-bridge --bin shine-dolphin-peer", peer.display());
        let dir = tempfile::Builder::new().prefix("shb").tempdir_in("/tmp").unwrap();
        let scenario = dir.path().join("bench.scenario");
        std::fs::write(&scenario, "seed = 1\n").unwrap();
        table("Dolphin backend, shine-dolphin-peer in lock-step", secs, || {
            let (peer, scenario) = (peer.clone(), scenario.clone());
            move |_i: usize| {
                let mut c = DolphinConfig::melee(&scenario, MatchSetup::default());
                c.executable = Some(peer.clone());
                Ok(Dolphin::launch(c)?)
            }
        });
    }
}
