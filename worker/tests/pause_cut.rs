//! A paused worker on the Dolphin backend cuts its episode instead of learning from
//! frames it never decided: the actor plays the test peer running free (as upstream
//! Dolphin does), its uploader stops taking batches for a while (a busy manager), the
//! actor blocks, the game runs on, and the episode open at that moment must end as a
//! cut, with the step across the pause answered [`Reply::Cut`] and not recorded.

mod common;
mod procs;

use common::harness::{Harness, Output};
use common::{actor_config, model, HANG};
use shine_bridge::dolphin::{Dolphin, DolphinConfig};
use shine_bridge::MatchSetup;
use shine_worker::pipeline::actor::{ActorConfig, Model};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

#[test]
fn a_pause_in_a_dolphin_episode_cuts_it() {
    let peer = procs::peer();
    let dir = tempfile::Builder::new().prefix("shp").tempdir_in("/tmp").unwrap();
    let scenario = dir.path().join("melee.scenario");
    std::fs::write(&scenario, "seed = 1\npace = free\nfps = 100\n").unwrap();
    let setup = MatchSetup::default();
    let cfg = ActorConfig {
        cpu_level_top_share: 1.0,
        // A batch per transition: the actor blocks within a few decisions of the pause.
        batch_transitions: 1,
        batch_secs: 3600.0,
        ..actor_config(1, 3)
    };
    let make = {
        let (peer, scenario, user) = (peer, scenario.clone(), dir.path().join("u"));
        move |_: usize| {
            let mut c = DolphinConfig::melee(&scenario, setup);
            c.executable = Some(peer.to_path_buf());
            c.user_dir = Some(user.clone());
            c.boot_timeout = HANG;
            Ok(Dolphin::launch(c)?)
        }
    };
    // A batch channel of one: the actor blocks as soon as the test stops taking batches.
    let mut actor = Harness::start(cfg, make, Model { net: model(1), version: 1 }, 0.3, Output::Kept { batches: 1 });
    let counters = actor.counters.clone();
    // Take batches for a while, then none for 2 s (at 100 frames/s the game runs on for
    // about 200 frames, by the peer's own clock, which catches up after a stall: a slow
    // machine only makes the pause longer), then take them again. The actor blocks on
    // the batch after the one waiting in the channel; when that batch holds an episode's
    // last transition, the pause falls between two episodes and rightly cuts nothing
    // (the next episode starts after it), so a pause that cut nothing is tried again
    // once 300 more frames are played. (A machine so loaded that the actor stalls for
    // 30 frames, 0.3 s here, cuts an episode too, rightly: so cuts before the pause are
    // not ruled out, only counted.)
    let started = Instant::now();
    let drain_until = |actor: &mut Harness, done: &dyn Fn() -> bool| {
        while !done() && started.elapsed() < HANG {
            let _ = actor.batches().try_recv();
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let mut pauses = 0;
    let before = loop {
        for _ in 0..4 {
            assert!(actor.batches().blocking_recv().is_some(), "the actor stopped");
        }
        let before = counters.episodes_cut.load(Relaxed);
        std::thread::sleep(Duration::from_millis(2000));
        pauses += 1;
        let frames_at_resume = counters.frames.load(Relaxed);
        drain_until(&mut actor, &|| counters.episodes_cut.load(Relaxed) > before || counters.frames.load(Relaxed) >= frames_at_resume + 300);
        if counters.episodes_cut.load(Relaxed) > before || pauses == 10 {
            break before;
        }
    };
    // Play on a little after the cut: the next episode (through the menus) goes on.
    let frames_at_cut = counters.frames.load(Relaxed);
    drain_until(&mut actor, &|| counters.frames.load(Relaxed) >= frames_at_cut + 200);
    actor.stop();
    assert!(counters.episodes_cut.load(Relaxed) > before, "no pause of {pauses} cut the episode open during it");
    assert!(counters.skipped_frames.load(Relaxed) >= 100, "the pause's frames are counted as skipped");
    assert!(counters.frames.load(Relaxed) >= frames_at_cut + 200, "play went on after the cut");
    assert!(counters.incomplete.load(Relaxed) >= 1, "the decision across the pause was not recorded");
}
