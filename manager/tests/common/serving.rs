//! The one in-process starter of a manager: `shine_manager::serve` on a listener on
//! `127.0.0.1:0`, spawned on a runtime the caller names, waited for until it answers
//! `/healthz`, and stopped gracefully (final checkpoint). The manager's tests use it
//! through `common::Manager`; `examples/ingest_bench.rs` includes this file with
//! `#[path]`, serving on a runtime of its own beside its clients'.

use shine_manager::config::Config;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

pub struct Serving {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    stop: CancellationToken,
    /// A manager dropped without [`Serving::stop`] is shut down too (as a test's end
    /// drops it).
    _stop_on_drop: DropGuard,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Serving {
    /// Bind 127.0.0.1:0 and serve `config` there, on `rt`. It answers once it has
    /// started (rebuilt its replays): [`Serving::healthy`].
    pub fn spawn(rt: &Handle, config: Config) -> anyhow::Result<Serving> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let stop = CancellationToken::new();
        let listener = {
            let _in = rt.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let task = rt.spawn(shine_manager::serve(listener, config, stop.clone()));
        Ok(Serving { url, _stop_on_drop: stop.clone().drop_guard(), stop, task })
    }

    /// Wait until it answers `GET /healthz` with 200 (connections wait in the
    /// listener's backlog meanwhile); an error when it stopped instead (its log says why).
    pub async fn healthy(&self, http: &reqwest::Client) -> anyhow::Result<()> {
        loop {
            if let Ok(r) = http.get(format!("{}/healthz", self.url)).send().await {
                if r.status() == 200 {
                    return Ok(());
                }
            }
            if self.task.is_finished() {
                anyhow::bail!("the manager stopped while starting (see the log above)");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Graceful shutdown (its queues drained into the replays, the final checkpoints);
    /// how the service ended.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.task.await?
    }
}
