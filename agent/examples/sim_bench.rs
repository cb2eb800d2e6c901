//! Simulator throughput on one core, including writing Melee's RAM layout and
//! extracting the 27-float state from it (what a worker does every frame).
//!
//!     cargo run --release -p shine-agent --example sim_bench [FRAMES]
//!
//! The pad cycles through the Untouchable macro-actions' scripts so the fighters move,
//! dodge and get hit; the match restarts when the agent loses a stock or a minute
//! passes, as episodes do.

use shine_agent::actions::ActionSet;
use shine_agent::StateReader;
use shine_bridge::sim::Sim;
use shine_bridge::{Emulator, MatchSetup};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let frames: u64 = std::env::args().nth(1).map_or(Ok(5_000_000), |s| s.parse()).expect("FRAMES must be a number");
    let setup = MatchSetup::default();
    let set = ActionSet::Untouchable;
    let pads: Vec<_> = (0..set.len()).flat_map(|a| set.script(a).unwrap().iter().copied()).collect();
    let mut sim = Sim::new(setup, 1);
    let mut reader = StateReader::new();
    let mut checksum = 0.0f32;
    let (mut resets, mut since_reset) = (0u64, 0u32);
    let start_stocks = setup.stocks;
    let t = Instant::now();
    for f in 0..frames {
        sim.step(&pads[f as usize % pads.len()]).unwrap();
        let obs = reader.read(sim.ram(), &setup).expect("state from the sim's RAM");
        checksum += obs.state[4] + obs.state[17];
        since_reset += 1;
        if obs.agent.stocks < start_stocks || since_reset >= 3600 {
            sim.reset(setup, f).unwrap();
            reader.reset();
            resets += 1;
            since_reset = 0;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    black_box(checksum);
    println!("simulator + RAM write + state read: {frames} frames in {secs:.2} s = {:.0} frames/s on one core ({resets} match resets)", frames as f64 / secs);
}
