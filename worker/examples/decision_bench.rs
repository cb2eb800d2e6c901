//! One worker's decision cost per environment-frame, on one core: read the 27-float
//! state out of Melee's RAM, one batched forward of the Dueling DQN for every
//! environment (pure Rust, as `shine-worker run` does), epsilon-greedy pick, and encode
//! each environment's pad as its pipe line.
//!
//!     cargo run --release -p shine-worker --example decision_bench [SECONDS_PER_SIZE]
//!
//! The RAM images are real: snapshots of the simulator mid-match (both fighters moving,
//! attacks, hits), several per environment, so reads are not all from one hot copy. The
//! model has random weights: inference costs the same whatever the weights are.
//! Targets (issue 5): under 25 us per decision at 1 environment, over 100,000
//! decisions per second per core at 64.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shine_agent::actions::ActionSet;
use shine_agent::model::{random_weights, save, ModelMeta, QNet, Scratch};
use shine_agent::{StateReader, STATE_DIM};
use shine_bridge::ram::RamView;
use shine_bridge::sim::Sim;
use shine_bridge::{Emulator, MatchSetup};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Snapshots per environment slot (each about 0.6 MB: 64 x 4 of them would not fit any
/// cache, like 64 real emulators' RAM).
const SNAPSHOTS: usize = 4;

/// `n` copies of the simulator's RAM window at different moments of level-9 matches.
fn snapshots(setup: MatchSetup, n: usize) -> (u32, Vec<Vec<u8>>) {
    let set = ActionSet::Untouchable;
    let pads: Vec<_> = (0..set.len()).flat_map(|a| set.script(a).unwrap().iter().copied()).collect();
    let mut sim = Sim::new(setup, 7);
    let mut out = Vec::with_capacity(n);
    let mut f = 0usize;
    while out.len() < n {
        // 37 frames apart: different states, several of them mid-hit.
        for _ in 0..37 {
            f += 1;
            if sim.step(&pads[f % pads.len()]).is_err() || f.is_multiple_of(3600) {
                sim.reset(setup, f as u64).expect("simulator reset");
            }
        }
        out.push(sim.ram().bytes().to_vec());
    }
    (sim.ram().base(), out)
}

fn main() {
    let secs: f64 = std::env::args().nth(1).map_or(Ok(3.0), |s| s.parse()).expect("SECONDS_PER_SIZE must be a number");
    let setup = MatchSetup::default();
    let set = ActionSet::Untouchable;
    let meta = ModelMeta::new(set.name(), set.len());
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let net = QNet::load(&save(&meta, &random_weights(&meta, &mut rng)).unwrap()).unwrap();
    let (base, images) = snapshots(setup, 64 * SNAPSHOTS);
    let epsilon = 0.01;
    println!("decision = state read from RAM + batched forward + epsilon-greedy + pad encode; one core, {secs} s per size");
    println!("{:>5} {:>14} {:>16} {:>10} {:>10} {:>10}", "envs", "us/decision", "decisions/s", "read us", "forward us", "encode us");
    for envs in [1usize, 8, 64] {
        let mut readers = vec![StateReader::new(); envs];
        let (mut states, mut q) = (vec![0.0f32; envs * STATE_DIM], vec![0.0f32; envs * set.len()]);
        let mut scratch = Scratch::default();
        let mut line = String::with_capacity(256);
        let (mut t_read, mut t_fwd, mut t_enc) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let mut decisions = 0u64;
        let mut round = 0usize;
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < secs {
            let t0 = Instant::now();
            for (e, reader) in readers.iter_mut().enumerate() {
                let img = &images[e * SNAPSHOTS + round % SNAPSHOTS];
                let obs = reader.read(RamView::with_base(base, img), &setup).expect("state from a simulator snapshot");
                states[e * STATE_DIM..(e + 1) * STATE_DIM].copy_from_slice(&obs.state);
            }
            let t1 = Instant::now();
            net.forward(&states, envs, &mut q, &mut scratch);
            let t2 = Instant::now();
            for e in 0..envs {
                let a = if rng.random::<f64>() < epsilon { rng.random_range(0..set.len()) } else { QNet::argmax(&q[e * set.len()..(e + 1) * set.len()]) };
                line.clear();
                set.script(a).unwrap()[0].encode_into(&mut line, true);
                black_box(&line);
            }
            let t3 = Instant::now();
            t_read += t1 - t0;
            t_fwd += t2 - t1;
            t_enc += t3 - t2;
            decisions += envs as u64;
            round += 1;
        }
        let total = (t_read + t_fwd + t_enc).as_secs_f64();
        let per = |d: Duration| d.as_secs_f64() * 1e6 / decisions as f64;
        println!(
            "{envs:>5} {:>14.2} {:>16.0} {:>10.2} {:>10.2} {:>10.2}",
            total * 1e6 / decisions as f64,
            decisions as f64 / total,
            per(t_read),
            per(t_fwd),
            per(t_enc)
        );
    }
}
