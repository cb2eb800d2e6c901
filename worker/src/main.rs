//! `shine-worker`: plays Melee (the embedded simulator or Dolphin) with a frozen model
//! and uploads its gameplay to a Shine manager; also plays and evaluates bots locally.

#![deny(unsafe_code)]

use clap::{Parser, Subcommand};
use shine_worker::run::settings;
use shine_worker::{doctor, play, run};
use std::io::IsTerminal;

#[derive(Parser)]
#[command(name = "shine-worker", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Play for a manager: register, download models, play, upload gameplay.
    ///
    /// Example: shine-worker run --manager http://10.0.0.2:8080 --token $SHINE_TOKEN
    Run(settings::RunArgs),
    /// Play episodes locally, on the simulator or in Dolphin with your Melee image, and
    /// print how each went: how long the bot survived, or the fight's stocks and damage.
    ///
    /// Example: shine-worker play --policy dodge --cpu-level 9 --episodes 200
    Play(play::PlayArgs),
    /// Measure a trained model on the simulator, with 95 % intervals: full-minute
    /// survival (the Untouchable task), or matches won, stocks and damage (the fight).
    ///
    /// Example: shine-worker eval --model shine-v12.safetensors --episodes 200 --cpu-level 9
    ///
    /// Example: shine-worker eval --model fox.safetensors --opponent model:marth.safetensors
    Eval(play::EvalArgs),
    /// Check a Dolphin setup (emulator, pipes, RAM mapping, the image) and say what to fix.
    ///
    /// Example: shine-worker doctor --iso ~/games/melee.iso
    Doctor(doctor::DoctorArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log file should hold text, not escape codes.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match Cli::parse().command {
        Command::Run(args) => run::run(args),
        Command::Play(args) => play::play(args),
        Command::Eval(args) => play::eval(args),
        Command::Doctor(args) => doctor::doctor(args),
    }
}
