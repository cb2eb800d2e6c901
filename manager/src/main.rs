//! `shine-manager`: parse the configuration, set up logging, run the service (or, with
//! `launch-script`, print the commands that start a worker fleet).

use anyhow::Context;
use clap::Parser;
use shine_manager::config::{Cli, Command};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::LaunchScript(args)) = &cli.command {
        print!("{}", shine_manager::launch::render(args)?);
        return Ok(());
    }
    tracing_subscriber::fmt().with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))).init();
    let mut config = cli.config()?;
    if cli.print_config {
        if config.server.token.is_some() {
            config.server.token = Some("(set; not printed)".into());
        }
        print!("{}", toml::to_string_pretty(&config).context("printing the configuration")?);
        return Ok(());
    }
    let shutdown = shine_manager::server::shutdown_signal()?;
    shine_manager::run(config, shutdown).await
}
