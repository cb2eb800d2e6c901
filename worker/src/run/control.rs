//! The run's conversation with the manager besides uploads, one task each, all on a
//! [`Session`] and all returning when its token is cancelled (also in the middle of a
//! request):
//!
//! - [`poll_models`]: a newer model (ETag) every `model_poll_secs`, handed to the actor.
//! - [`heartbeats`]: the worker's counters every `heartbeat_secs`; the answer carries
//!   the current epsilon and whether a browser watches; a 404 means "register again".
//! - [`report_episodes`]: finished episodes, in batches, for the dashboard's curves.
//!
//! And what `run` needs before they start: [`retrying`] (registration and the first
//! model, waiting for the manager as long as it takes) and [`load_model`].

use crate::pipeline::actor::Model;
use crate::client::{ApiError, ModelFetch};
use crate::pipeline::live::LiveTap;
use crate::pipeline::shared::Session;
use crate::pipeline::uploader;
use anyhow::{bail, Context};
use shine_agent::model::QNet;
use shine_agent::protocol::{EpisodeReport, Heartbeat, RegisterRequest, Registration};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Retry `f` with backoff while its error is retryable, until it succeeds or `cancel`
/// fires (`Ok(None)`); a final error is returned.
pub async fn retrying<T, Fut: Future<Output = Result<T, ApiError>>>(
    what: &str,
    cancel: &CancellationToken,
    mut f: impl FnMut() -> Fut,
) -> anyhow::Result<Option<T>> {
    let mut delays = uploader::backoff();
    loop {
        let attempt = tokio::select! {
            r = f() => r,
            _ = cancel.cancelled() => return Ok(None),
        };
        match attempt {
            Ok(v) => return Ok(Some(v)),
            Err(e @ ApiError::Status { status: 401 | 403, .. }) => bail!("{e}: check --token / SHINE_TOKEN"),
            Err(e) if e.is_retryable() => {
                let delay = delays.next().unwrap_or(Duration::from_secs(30));
                tracing::warn!("{what}: {e}; retrying in {:.1} s", delay.as_secs_f64());
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = cancel.cancelled() => return Ok(None),
                }
            }
            Err(e) => bail!("{what}: {e}"),
        }
    }
}

/// Parse a downloaded model file (off the async threads).
pub async fn load_model(bytes: Vec<u8>, header_version: Option<u64>) -> anyhow::Result<Model> {
    load_model_into(None, bytes, header_version).await
}

/// A model of another action set than the worker registered for is refused: its
/// outputs would name other actions (a manager serving two runs must never mix them).
pub fn check_model(model: &Model, reg: &Registration) -> anyhow::Result<()> {
    let meta = model.net.meta();
    if meta.action_set != reg.action_set {
        anyhow::bail!(
            "the manager served model v{} for the action set {:?}, but this worker registered to play {:?}",
            model.version,
            meta.action_set,
            reg.action_set
        );
    }
    if meta.side.name() != reg.side {
        anyhow::bail!("the manager served model v{} playing {}, but this worker registered to play {}", model.version, meta.side, reg.side);
    }
    Ok(())
}

/// [`load_model`] into `spare`'s buffers when it has the file's shapes (no weights
/// allocated: the steady path of a long run), else into new ones.
pub async fn load_model_into(spare: Option<QNet>, bytes: Vec<u8>, header_version: Option<u64>) -> anyhow::Result<Model> {
    let net = tokio::task::spawn_blocking(move || match spare {
        Some(mut net) => match net.load_into(&bytes) {
            Ok(()) => Ok(net),
            Err(shine_agent::model::ModelError::Shape) => QNet::load(&bytes),
            Err(e) => Err(e),
        },
        None => QNet::load(&bytes),
    })
    .await?
    .context("the manager's model file does not load")?;
    // The file's own metadata is authoritative; the header only saves a parse.
    let version = net.meta().model_version;
    if header_version.is_some_and(|h| h != version) {
        tracing::warn!(header = header_version, file = version, "model version header and file disagree; using the file's");
    }
    Ok(Model { net, version })
}

/// Ask for a newer model every `every`; hand it to the actor, which swaps it in
/// between decisions. `etag` and `version` name the model the actor has. The actor
/// sends the networks it swapped out back on `spares`: a new model is loaded into one.
pub async fn poll_models(
    session: Session,
    reg: Registration,
    mut etag: Option<String>,
    mut version: u64,
    every: Duration,
    tx: tokio::sync::mpsc::Sender<Model>,
    mut spares: tokio::sync::mpsc::Receiver<QNet>,
) {
    let cancel = &session.cancel;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = cancel.cancelled() => return,
        }
        let fetched = tokio::select! {
            r = session.client.latest_model(etag.as_deref()) => r,
            _ = cancel.cancelled() => return,
        };
        match fetched {
            Ok(ModelFetch::Model { bytes, etag: tag, version: v }) => {
                match load_model_into(spares.try_recv().ok(), bytes, v).await.and_then(|m| check_model(&m, &reg).map(|()| m)) {
                    Ok(m) if m.version != version => {
                        version = m.version;
                        etag = tag;
                        if tx.send(m).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => etag = tag,
                    Err(e) => tracing::warn!("{e:#}; keeping model v{version}"),
                }
            }
            Ok(ModelFetch::NotModified | ModelFetch::NoneYet) => {}
            Err(e) => tracing::debug!("model poll: {e}"),
        }
    }
}

/// Heartbeats every `heartbeat_secs`; the answer carries the current epsilon. When
/// the manager forgot us (404 here or on an upload), register again with `request`.
pub async fn heartbeats(session: Session, request: RegisterRequest, reg: Registration, tap: Arc<LiveTap>) {
    let Session { client, identity, counters, uploads, cancel } = session;
    let every = Duration::from_secs_f64(reg.heartbeat_secs.max(0.1));
    let (mut last_t, mut last_frames) = (Instant::now(), 0u64);
    let mut last_log = Instant::now();
    loop {
        let reregister = tokio::select! {
            _ = tokio::time::sleep(every) => false,
            _ = identity.reregister.notified() => true,
            _ = cancel.cancelled() => return,
        };
        let reregister = reregister || {
            let now = Instant::now();
            let frames = counters.frames.load(Relaxed);
            let hb = Heartbeat {
                frames,
                env_fps: (frames - last_frames) as f64 / now.duration_since(last_t).as_secs_f64().max(1e-3),
                skipped_frames: counters.skipped_frames.load(Relaxed),
                episodes: counters.episodes.load(Relaxed),
                episodes_cut: counters.episodes_cut.load(Relaxed),
                model_version: counters.model_version.load(Relaxed),
                spooled_batches: uploads.spooled_batches.load(Relaxed),
                envs_active: counters.envs.load(Relaxed).try_into().unwrap_or(u32::MAX),
                envs_auto: counters.envs_auto.load(Relaxed),
                envs_reason: counters.envs_reason(),
            };
            (last_t, last_frames) = (now, frames);
            if last_log.elapsed() >= Duration::from_secs(60) {
                last_log = Instant::now();
                tracing::info!(
                    frames = hb.frames,
                    env_fps = format!("{:.0}", hb.env_fps),
                    episodes = hb.episodes,
                    model_version = hb.model_version,
                    uploaded = uploads.transitions_uploaded.load(Relaxed),
                    spooled_batches = hb.spooled_batches,
                    "progress"
                );
            }
            let answer = tokio::select! {
                r = client.heartbeat(identity.worker_id(), &hb) => r,
                _ = cancel.cancelled() => return,
            };
            match answer {
                Ok(reply) => {
                    counters.set_epsilon(reply.epsilon);
                    // The long poll normally notices first; this covers a poll that
                    // was between retries.
                    if reply.watch && !tap.watched() {
                        tap.wake.notify_one();
                    }
                    false
                }
                Err(ApiError::Status { status: 404, .. }) => true,
                Err(e) => {
                    tracing::debug!("heartbeat: {e}");
                    false
                }
            }
        };
        if reregister {
            let answer = tokio::select! {
                r = client.register(&request) => r,
                _ = cancel.cancelled() => return,
            };
            match answer {
                Ok(new) => {
                    tracing::info!(old = identity.worker_id(), new = new.worker_id, "the manager had forgotten this worker (restarted?); registered again");
                    if (new.n_step, new.action_set.as_str(), new.task.as_str(), new.side.as_str())
                        != (reg.n_step, reg.action_set.as_str(), reg.task.as_str(), reg.side.as_str())
                    {
                        tracing::warn!(
                            "the manager's n_step, action set, task or side changed; restart this worker to follow (its uploads may be rejected until then)"
                        );
                    }
                    identity.set_worker_id(new.worker_id);
                    counters.set_epsilon(new.epsilon);
                }
                Err(e) => tracing::warn!("registering again: {e}"),
            }
        }
    }
}

/// Post finished episodes in batches every `every`; keep up to 10,000 while the
/// manager is away (they feed charts, so the oldest go first when that is full).
/// Returns after a last post once the actor has dropped its sender. It does not stop on
/// the session's token: the actor's last episodes come after it. `stop` bounds that last
/// post: when it fires the task returns at once, what it still holds unsent (`run`
/// fires it when its wait for this task runs out).
pub async fn report_episodes(session: Session, mut rx: tokio::sync::mpsc::Receiver<EpisodeReport>, every: Duration, stop: CancellationToken) {
    const KEEP: usize = 10_000;
    let Session { client, identity, .. } = session;
    let mut queue: VecDeque<EpisodeReport> = VecDeque::new();
    let mut tick = tokio::time::interval(every);
    loop {
        let open = tokio::select! {
            r = rx.recv() => match r {
                Some(e) => {
                    if queue.len() == KEEP {
                        queue.pop_front();
                    }
                    queue.push_back(e);
                    continue;
                }
                None => false,
            },
            _ = tick.tick() => true,
            _ = stop.cancelled() => return,
        };
        while !queue.is_empty() {
            let chunk: Vec<EpisodeReport> = queue.iter().take(1000).copied().collect();
            let n = chunk.len();
            let answer = tokio::select! {
                a = client.episodes(identity.worker_id(), chunk) => a,
                _ = stop.cancelled() => return,
            };
            match answer {
                Ok(()) => {
                    queue.drain(..n);
                }
                Err(e @ ApiError::Status { status: 404, .. }) => {
                    identity.reregister.notify_one();
                    tracing::debug!("episode report: {e}");
                    break;
                }
                Err(e) if e.is_retryable() => {
                    tracing::debug!("episode report: {e}");
                    break;
                }
                Err(e) => {
                    tracing::warn!("the manager rejected {n} episode reports: {e}");
                    queue.drain(..n);
                }
            }
        }
        if !open {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;
    use crate::pipeline::shared::{ActorCounters, Identity, UploadStats};

    #[test]
    fn a_model_of_another_action_set_or_side_than_the_run_is_refused() {
        use rand::SeedableRng;
        use shine_agent::model::{random_weights, save, ModelMeta};
        use shine_agent::Side;
        let reg = |side: Option<&str>| -> Registration {
            let mut v = serde_json::json!({
                "worker_id": 1, "epsilon": 0.1, "action_set": "fight", "task": "fight", "n_step": 3, "gamma": 0.99,
                "upload_every_transitions": 1000, "upload_every_secs": 5.0, "model_poll_secs": 5.0, "heartbeat_secs": 5.0,
                "eval_share": 0.0, "cpu_level": 9, "cpu_level_top_share": 1.0
            });
            if let Some(s) = side {
                v["side"] = s.into();
            }
            serde_json::from_value(v).unwrap()
        };
        let model = |set: shine_agent::ActionSet, side| {
            let meta = ModelMeta::new(set.name(), set.len()).with_side(side);
            let bytes = save(&meta, &random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1))).unwrap();
            Model { net: QNet::load(&bytes).unwrap(), version: 2 }
        };
        use shine_agent::ActionSet::{Fight, Untouchable};
        assert!(check_model(&model(Fight, Side::Marth), &reg(Some("marth"))).is_ok());
        // A manager from before sides: its runs are Fox's.
        assert_eq!(reg(None).side, "fox");
        assert!(check_model(&model(Fight, Side::Fox), &reg(None)).is_ok());
        let e = check_model(&model(Fight, Side::Fox), &reg(Some("marth"))).unwrap_err().to_string();
        assert!(e.contains("model v2 playing fox") && e.contains("registered to play marth"), "{e}");
        let e = check_model(&model(Untouchable, Side::Marth), &reg(Some("marth"))).unwrap_err().to_string();
        assert!(e.contains("action set \"untouchable\""), "{e}");
    }

    #[tokio::test]
    async fn the_episode_reporter_returns_on_stop_even_mid_post() {
        // A manager that takes connections and never answers: the last post hangs (the
        // client's own timeout is a minute).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let session = Session {
            client: Client::new(&url, "t").unwrap(),
            identity: Arc::new(Identity::new(1)),
            counters: Arc::new(ActorCounters::default()),
            uploads: Arc::new(UploadStats::default()),
            cancel: CancellationToken::new(),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let stop = CancellationToken::new();
        let reporter = tokio::spawn(report_episodes(session, rx, Duration::from_secs(3600), stop.clone()));
        let report = EpisodeReport { frames: 60, reward: 1.0, survived: false, eval: false, cpu_level: 9, model_version: 1 };
        tx.send(report).await.unwrap();
        drop(tx);
        // The actor is gone: the reporter makes its last post, which does not end. (The
        // sleep only gives an early return time to show: weaker on a slow machine, never
        // wrong.)
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!reporter.is_finished(), "the post to a manager that never answers is still waiting");
        stop.cancel();
        // Returned because it was stopped, not because the post gave up: the bound is
        // half the client's one-minute timeout, not a guess at this machine's speed
        // (a return on stop takes milliseconds).
        tokio::time::timeout(Duration::from_secs(30), reporter).await.expect("the reporter returns once stopped").unwrap();
    }
}
