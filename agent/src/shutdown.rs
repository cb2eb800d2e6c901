//! The one shutdown pattern of both binaries (feature `shutdown`).
//!
//! A [`CancellationToken`] is the signal: [`cancel_on_signals`] cancels it on the first
//! Ctrl-C (SIGINT) or SIGTERM (what systemd and Kubernetes send). Every long-lived task
//! takes a clone and returns when it is cancelled, including those that wait on the
//! network (long polls, WebSockets), and is tracked by a `TaskTracker` that the binary
//! closes and waits on; nothing is aborted. Then the part that must finish last (the
//! manager's trainer with its final checkpoint, the worker's spool flush) runs. A
//! second signal means "now": the process exits at once with status 130.

use tokio_util::sync::CancellationToken;

/// Cancel `token` on the first SIGINT or SIGTERM; exit with status 130 on a second.
///
/// The handlers are installed before this returns (it must be called inside a tokio
/// runtime), so a signal that arrives while the binary is still starting is not lost,
/// and does not kill the process with the default action either.
#[cfg(unix)]
pub fn cancel_on_signals(token: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let which = tokio::select! {
            _ = int.recv() => "Ctrl-C",
            _ = term.recv() => "SIGTERM",
        };
        tracing::info!("{which} received: shutting down (signal again to quit at once)");
        token.cancel();
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        tracing::warn!("second signal: quitting now");
        std::process::exit(130);
    });
    Ok(())
}

#[cfg(not(unix))]
pub fn cancel_on_signals(token: CancellationToken) -> std::io::Result<()> {
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        token.cancel();
        let _ = tokio::signal::ctrl_c().await;
        std::process::exit(130);
    });
    Ok(())
}
