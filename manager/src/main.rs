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
