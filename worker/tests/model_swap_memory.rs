//! Memory stays flat across model swaps (the lesson of the Parallel Joint PPO paper:
//! a worker that keeps every model it was sent grows until it is killed).
//!
//! The actor plays a scripted game while 150 models go through the real path (file
//! bytes loaded into a network the actor handed back, the channel, the swap between
//! decisions). Resident memory is
//! read from /proc/self/status after a warm-up and after the swaps. This file holds a
//! single test so that no other test's allocations run in the same process.

mod common;

use common::harness::{Harness, Output};
use common::{actor_config, model_bytes, wait_until, Scripted};
use shine_agent::model::QNet;
use shine_bridge::MatchSetup;
use shine_worker::pipeline::actor::Model;
use std::sync::atomic::Ordering::Relaxed;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux)");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn memory_stays_flat_over_150_model_swaps() {
    const WARMUP: u64 = 10;
    const SWAPS: u64 = 150;
    let cfg = actor_config(2, 3);
    let first = Model { net: QNet::load(&model_bytes(0, 0)).unwrap(), version: 0 };
    // What the actor produces is consumed as the uploader would.
    let mut actor = Harness::start(cfg, |_| Ok(Scripted::new(MatchSetup::default(), |_| None)), first, 0.1, Output::Consumed);
    let counters = actor.counters.clone();
    // Two weight sets, alternating, so each swap really changes the weights.
    let files = [model_bytes(0, 1), model_bytes(0, 2)];
    let mut before = 0;
    let mut buffers = std::collections::BTreeSet::new();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for v in 1..=WARMUP + SWAPS {
        let bytes = files[v as usize % 2].clone();
        // As the worker's model poll does: into a network the actor handed back.
        let model = rt.block_on(shine_worker::run::control::load_model_into(actor.spares.try_recv().ok(), bytes, None)).unwrap();
        if v > WARMUP {
            buffers.insert(model.net.weights_addr());
        }
        actor.models.blocking_send(Model { net: model.net, version: v }).unwrap();
        wait_until(&format!("the actor to take model {v}"), || counters.model_swaps.load(Relaxed) >= v);
        if v == WARMUP {
            before = rss_kib();
        }
    }
    let after = rss_kib();
    assert_eq!(counters.model_version.load(Relaxed), WARMUP + SWAPS);
    assert!(counters.frames.load(Relaxed) > 0, "the actor kept playing while models changed");
    actor.stop();

    // One model is about 0.56 MB of weights; keeping each old one would add ~80 MB
    // over 150 swaps. The bound: less than 5 % between the 10th swap and the last.
    let growth = after as i64 - before as i64;
    eprintln!("RSS {before} KiB after {WARMUP} swaps, {after} KiB after {} (growth {growth} KiB)", WARMUP + SWAPS);
    assert!((growth.abs() as f64) < 0.05 * before as f64, "RSS grew {growth} KiB over {SWAPS} model swaps: old models are kept somewhere");
    // The swaps reuse a handful of weight buffers (the actor's, the channel's, the
    // spares'), not a new one each time.
    assert!(buffers.len() <= 5, "{} distinct weight buffers over {SWAPS} swaps", buffers.len());

    // The measurement can see a leak of that kind: keep 30 models alive on purpose.
    let leaked: Vec<QNet> = (0..30).map(|_| QNet::load(&files[0]).unwrap()).collect();
    let leak_growth = rss_kib() as i64 - after as i64;
    assert!(leak_growth > 10 * 1024, "holding 30 models should show (+{leak_growth} KiB)");
    drop(leaked);
}
