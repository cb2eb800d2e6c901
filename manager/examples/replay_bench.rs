//! The replay benchmark (the paper's Figure 3 and Table 1 in one run); see
//! `docs/benchmarks.md`.
//!
//! `cargo run --release -p shine-manager --example replay_bench -- --help`

use clap::Parser;

/// Device replay against in-RAM replay: add cost per experience and train-step time.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: shine_manager::trainer::bench::BenchArgs,
}

fn main() -> anyhow::Result<()> {
    shine_manager::trainer::bench::run(Cli::parse().args)
}
