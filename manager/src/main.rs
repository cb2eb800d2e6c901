//! `shine-manager`: parse the configuration, set up logging, run the service (or, with
//! `launch-script`, print the commands that start a worker fleet).

#![deny(unsafe_code)]

use anyhow::Context;
use clap::Parser;
use shine_manager::config::{Cli, Command};
use std::io::IsTerminal;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    survive_file_size_limits()?;
    let cli = Cli::parse();
    if let Some(Command::LaunchScript(args)) = &cli.command {
        print!("{}", shine_manager::launch::render(args)?);
        return Ok(());
    }
    // Colour only on a terminal: a log file should hold text, not escape codes.
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_ansi(std::io::stdout().is_terminal())
        .init();
    let mut config = cli.config()?;
    if cli.check_config {
        config.validate()?;
        println!("the configuration is valid");
        return Ok(());
    }
    if cli.print_config {
        if config.server.token.is_some() {
            config.server.token = Some("(set; not printed)".into());
        }
        print!("{}", toml::to_string_pretty(&config).context("printing the configuration")?);
        return Ok(());
    }
    let shutdown = CancellationToken::new();
    shine_agent::shutdown::cancel_on_signals(shutdown.clone()).context("installing the signal handlers")?;
    shine_manager::run(config, shutdown).await
}

/// Under a file-size limit (`ulimit -f`, systemd's `LimitFSIZE=`, some containers) a write
/// past it makes the kernel send SIGXFSZ, whose default action kills the process: the
/// manager would die mid-upload instead of answering `503 storage_full` and serving on
/// (docs/durability.md, "Disk"). With any handler installed the write fails with EFBIG
/// instead, which the write-ahead log turns into `storage_full` (PostgreSQL ignores
/// SIGXFSZ for the same reason). signal-hook's flag registration installs one through a
/// safe API (`libc::signal(SIGXFSZ, SIG_IGN)` would need `unsafe`); the flag itself is
/// not read: the failing write already says everything.
fn survive_file_size_limits() -> anyhow::Result<()> {
    let hit = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGXFSZ, hit).context("installing a SIGXFSZ handler")?;
    Ok(())
}
