//! Shine's 27 floats and greedy actions on a real game of Melee, against the Python
//! adapter for Slippi players (`python/shine_bot`), which computes them from libmelee's
//! game state. The two sides share nothing but the replay file: this side reads it with
//! the `peppi` crate, writes each frame's values where Melee keeps them into a RAM
//! image, and reads the state back through the very code the workers use
//! (`StateReader` over a `RamView`); the adapter reads it with libmelee.
//!
//! The replay (`python/tests/data/game.slp`, from the peppi project, MIT licence
//! beside it) is Slippi format 1.0.0: its post-frame events carry no in-air flag, jumps,
//! self-induced speeds or hitlag, and no Slippi replay carries the smash-charge flag.
//! Those fields are 0 in RAM here and in the adapter (docs: `python/README.md`).
//!
//! Needs the project's Python environment with `melee` (scripts/test.sh installs it and
//! sets SHINE_PYTHON).

use peppi::frame::transpose::Post;
use rand::SeedableRng;
use shine_agent::actions::ActionSet;
use shine_agent::model::{self, ModelMeta, QNet, Scratch};
use shine_agent::{StateReader, STATE_DIM};
use shine_bridge::melee::{self, characters};
use shine_bridge::ram::{addr, fighter, static_block, static_player, RamImage, RamMut, SIM_FIGHTER_DATA};
use shine_bridge::MatchSetup;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn replay() -> PathBuf {
    Path::new(ROOT).join("python/tests/data/game.slp")
}

/// The project's Python (scripts/test.sh sets SHINE_PYTHON), else `.venv`'s.
fn python() -> PathBuf {
    std::env::var_os("SHINE_PYTHON").map(PathBuf::from).unwrap_or_else(|| Path::new(ROOT).join(".venv/bin/python"))
}

/// Jumps a character has in all (Slippi records the jumps left): 6 for Kirby (external
/// id 0x04) and Jigglypuff (0x0F), 2 for everyone else.
fn max_jumps(external: u8) -> u8 {
    if matches!(external, 0x04 | 0x0F) {
        6
    } else {
        2
    }
}

/// One port's post-frame values, written where Melee keeps them (static player block
/// and fighter data); what the replay does not record stays 0.
fn write_player(w: &mut RamMut, port: usize, fighter_data: u32, external: u8, post: &Post) {
    let s = static_block(port);
    w.set_u32(s + static_player::CHARACTER, u32::from(external)).unwrap();
    w.set_f32(s + static_player::X, post.position.x).unwrap();
    w.set_f32(s + static_player::Y, post.position.y).unwrap();
    // The displayed percent is the whole part of the fighter's.
    w.set_u16(s + static_player::PERCENT, post.percent as u16).unwrap();
    w.set_u8(s + static_player::STOCKS, post.stocks).unwrap();
    w.set_u32(s + static_player::FIGHTER_PTR, fighter_data).unwrap();
    w.set_u32(fighter_data + fighter::ACTION_STATE, u32::from(post.state)).unwrap();
    w.set_f32(fighter_data + fighter::FACING, post.direction).unwrap();
    let (vx, vy) = post.velocities.map_or((0.0, 0.0), |v| (v.self_x_air, v.self_y));
    w.set_f32(fighter_data + fighter::SELF_AIR_VX, vx).unwrap();
    w.set_f32(fighter_data + fighter::SELF_VY, vy).unwrap();
    w.set_u32(fighter_data + fighter::IN_AIR, u32::from(post.airborne.unwrap_or(0))).unwrap();
    w.set_f32(fighter_data + fighter::SHIELD_SIZE, post.shield).unwrap();
    w.set_u8(fighter_data + fighter::JUMPS_USED, post.jumps.map_or(0, |left| max_jumps(external).saturating_sub(left))).unwrap();
    w.set_f32(fighter_data + fighter::HITLAG_LEFT, post.hitlag.unwrap_or(0.0)).unwrap();
    w.set_u32(fighter_data + fighter::CHARGING_SMASH, 0).unwrap();
}

/// Every frame of the replay: (frame number, the 27 floats from Fox's (port 2's) point
/// of view, Fox's action state and in-air flag when recorded).
fn rust_states() -> Vec<(i32, [f32; STATE_DIM], u32, Option<u8>)> {
    let file = std::fs::File::open(replay()).expect("the replay is in python/tests/data");
    let game = peppi::io::slippi::read(std::io::BufReader::new(file), None).expect("peppi reads the replay");
    let version = game.start.slippi.version;
    let players: Vec<(usize, u8)> = game.start.players.iter().map(|p| (p.port as usize, p.character)).collect();
    // Port 1 Marth (a person), port 2 Fox (the game's CPU): Fox is the bot's side.
    assert_eq!(players, [(0, characters::MARTH.external), (1, characters::FOX.external)], "the replay's cast");
    let setup = MatchSetup { agent_port: 1, opponent_port: 0, ..MatchSetup::default() };
    let mut img = RamImage::sim();
    let mut reader = StateReader::new();
    let mut out = Vec::with_capacity(game.frames.len());
    for i in 0..game.frames.len() {
        let frame = game.frames.transpose_one(i, version);
        {
            let mut w = img.writer();
            w.set_u32(addr::FRAME_COUNTER, i as u32).unwrap();
            for (k, port) in frame.ports.iter().enumerate() {
                let (p, external) = players[k];
                assert_eq!(port.port as usize, p);
                write_player(&mut w, p, SIM_FIGHTER_DATA[k], external, &port.leader.post);
            }
        }
        let obs = reader.read(img.view(), &setup).unwrap();
        let fox = &frame.ports[1].leader.post;
        out.push((frame.id, obs.state, u32::from(fox.state), fox.airborne));
    }
    out
}

/// The adapter's CSV: (frame, 27 floats, greedy action when a model was given).
fn adapter_states(model: &Path, out: &Path) -> Vec<(i32, Vec<f32>, usize)> {
    let py = python();
    let run = Command::new(&py)
        .args(["-m", "shine_bot", "states", "--slp"])
        .arg(replay())
        .args(["--port", "2", "--opponent-port", "1", "--model"])
        .arg(model)
        .arg("--out")
        .arg(out)
        .env("PYTHONPATH", Path::new(ROOT).join("python"))
        .output()
        .unwrap_or_else(|e| panic!("running {} (scripts/test.sh installs the project's Python with `melee`): {e}", py.display()));
    assert!(
        run.status.success(),
        "the adapter failed ({}; scripts/test.sh installs `melee` into the project's Python):\n{}",
        py.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(out).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert_eq!(header.split(',').count(), 1 + STATE_DIM + 1, "{header}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let floats = f[1..=STATE_DIM].iter().map(|v| v.parse::<f32>().unwrap()).collect();
            (f[0].parse().unwrap(), floats, f[STATE_DIM + 1].parse().unwrap())
        })
        .collect()
}

#[test]
fn the_python_adapter_builds_shines_state_and_picks_shines_action_on_every_frame_of_a_real_game() {
    let ours = rust_states();
    assert_eq!(ours.len(), 5209, "frames -123 to 5085");
    assert!(ours.windows(2).all(|w| w[1].0 == w[0].0 + 1), "one row a frame, in order");

    // Fox's action states in a real game: each one bridge/src/melee knows (the replay
    // records no in-air flag, so either way counts where it does not say).
    let mut fox_actions: Vec<u32> = ours.iter().map(|r| r.2).collect();
    fox_actions.sort_unstable();
    fox_actions.dedup();
    println!("Fox's action states in the replay ({}): {:x?}", fox_actions.len(), fox_actions);
    for (_, _, a, air) in &ours {
        let known = match air {
            Some(air) => melee::is_real_action(characters::FOX, *a, *air != 0),
            None => melee::is_real_action(characters::FOX, *a, false) || melee::is_real_action(characters::FOX, *a, true),
        };
        assert!(known, "Fox's action state {a:#x} is not one bridge/src/melee knows");
    }

    let dir = tempfile::tempdir().unwrap();
    for set in ActionSet::ALL {
        // A random model whose greedy action moves with the state over this game (one
        // that always picks the same action would prove little): the first seed that
        // gives three different actions.
        let (bytes, net) = (0..200u64)
            .map(|seed| {
                let meta = ModelMeta::new(set.name(), set.len());
                let weights = model::random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
                let bytes = model::save(&meta, &weights).unwrap();
                let net = QNet::load(&bytes).unwrap();
                (bytes, net)
            })
            .find(|(_, net)| {
                let (mut q, mut scratch) = (vec![0.0; set.len()], Scratch::default());
                let mut seen = std::collections::BTreeSet::new();
                for (_, state, _, _) in ours.iter().step_by(10) {
                    net.forward(state, 1, &mut q, &mut scratch);
                    seen.insert(QNet::argmax(&q));
                }
                seen.len() >= 3
            })
            .expect("some random model changes its mind over a whole game");
        let path = dir.path().join(format!("{}.safetensors", set.name()));
        std::fs::write(&path, &bytes).unwrap();
        let theirs = adapter_states(&path, &dir.path().join(format!("{}.csv", set.name())));
        assert_eq!(theirs.len(), ours.len(), "{set}: one row per frame on both sides");
        let (mut q, mut scratch) = (vec![0.0; set.len()], Scratch::default());
        for ((frame, state, _, _), (their_frame, their_state, their_action)) in ours.iter().zip(&theirs) {
            assert_eq!(frame, their_frame);
            for (i, (a, b)) in state.iter().zip(their_state).enumerate() {
                assert!((a - b).abs() <= 1e-6, "{set}: frame {frame}, float {i}: Shine {a}, the adapter {b}");
            }
            // One row a call: the order of the sums the adapter repeats.
            net.forward(state, 1, &mut q, &mut scratch);
            let ours = QNet::argmax(&q);
            assert_eq!(ours, *their_action, "{set}: frame {frame}: Shine picks {ours}, the adapter {their_action}; Q {q:?}");
        }
    }
}
