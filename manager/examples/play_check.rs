//! Checks a match played in the browser against the simulator (`shine_manager::play::check`):
//! the frames the page received, replayed natively with the person's pads and the
//! model's macro-actions, must give the same fighters frame by frame, and each of the
//! bot's decisions must be the model's greedy choice on the state streamed.
//!
//! ```text
//! cargo run -p shine-manager --example play_check -- MODEL.safetensors MATCH.json
//! ```
//! MATCH.json: `{"seed": S, "frames": [every "frame" message's frame, in order]}` (what
//! the dashboard test saves). Exit status 0 and one line when it holds; 1 and the first
//! frame that differs otherwise.

use anyhow::Context;
use clap::Parser;
use shine_agent::model::QNet;
use shine_agent::ActionSet;
use shine_manager::play::{check, Frame};

#[derive(Parser)]
#[command(about = "Check a match played in the browser against the simulator")]
struct Args {
    /// The model file the match was played against.
    model: std::path::PathBuf,
    /// The match: {"seed": S, "frames": [...]}.
    frames: std::path::PathBuf,
}

#[derive(serde::Deserialize)]
struct Played {
    seed: u64,
    frames: Vec<Frame>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bytes = std::fs::read(&args.model).with_context(|| format!("reading {}", args.model.display()))?;
    let net = QNet::load(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", args.model.display()))?;
    let actions = ActionSet::from_name(&net.meta().action_set).context("the model's action set")?;
    let text = std::fs::read_to_string(&args.frames).with_context(|| format!("reading {}", args.frames.display()))?;
    let played: Played = serde_json::from_str(&text).with_context(|| format!("{}: not a match", args.frames.display()))?;
    anyhow::ensure!(!played.frames.is_empty(), "{}: no frames", args.frames.display());
    match check(&net, actions, played.seed, &played.frames) {
        Ok(()) => {
            let decisions = played.frames.iter().filter(|f| f.state.is_some()).count();
            println!("{} frames match the simulator's, {decisions} decisions the model's greedy choices", played.frames.len());
            Ok(())
        }
        Err(e) => {
            eprintln!("play_check: {e}");
            std::process::exit(1);
        }
    }
}
