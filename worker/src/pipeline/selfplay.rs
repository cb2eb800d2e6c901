//! Self-play's opponents: the opponent run's kept models, polled from the manager and
//! each loaded once, and the draw of each training episode's opponent.
//!
//! ```text
//! poll_pool ─ GET /runs/{opponent}/models, new versions downloaded ─► watch<Pool> ─► actor
//!                                                  (Pool::draw at every training episode)
//! ```
//!
//! The mix ([`Pool::draw`]): the scripted CPU in `cpu_share` of the training episodes
//! (so neither side forgets the opponent it is evaluated against); otherwise the
//! opponent run's newest model in `latest_share` of them (the opponent it must beat
//! now), else one of its older kept models drawn uniformly (past selves it must not
//! forget how to beat: the pool AlphaStar and OpenAI Five keep, here the manager's own
//! registry, newest and best-evaluated).

use crate::client::Client;
use crate::pipeline::envs::Pick;
use rand::Rng;
use shine_agent::model::QNet;
use shine_agent::protocol::SelfPlay;
use shine_agent::{ActionSet, Side};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The opponent run's models at hand, newest first.
#[derive(Default, Clone)]
pub struct Pool {
    models: Vec<(u64, Arc<QNet>)>,
}

impl Pool {
    /// A pool of these models, newest first (tests, tools).
    pub fn of(models: Vec<(u64, Arc<QNet>)>) -> Pool {
        Pool { models }
    }

    pub fn len(&self) -> usize {
        self.models.len()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    pub fn versions(&self) -> Vec<u64> {
        self.models.iter().map(|(v, _)| *v).collect()
    }

    /// One training episode's opponent (the mix in the module doc); `None`: the
    /// scripted CPU (also while the pool is empty). The rival explores at `epsilon`.
    pub fn draw(&self, sp: &SelfPlay, epsilon: f64, rng: &mut impl Rng) -> Option<Pick> {
        if self.models.is_empty() || rng.random::<f64>() < sp.cpu_share {
            return None;
        }
        let older = &self.models[1..];
        let (version, net) = if older.is_empty() || rng.random::<f64>() < sp.latest_share { &self.models[0] } else { &older[rng.random_range(0..older.len())] };
        Some(Pick { net: net.clone(), version: *version, epsilon })
    }
}

/// What an opponent model must be: the opponent side, the same action set.
#[derive(Debug, Clone, Copy)]
pub struct Wanted {
    pub side: Side,
    pub actions: ActionSet,
}

/// Keep `pool` equal to the opponent run's kept models: every `every`, list them, load
/// the new ones, forget the pruned ones, and publish the result when it changed. A
/// model of another side or action set is skipped (said once). Returns on `cancel`.
pub async fn poll_pool(client: Client, wanted: Wanted, every: Duration, pool: tokio::sync::watch::Sender<Arc<Pool>>, cancel: CancellationToken) {
    let mut current = Pool::default();
    let mut refused: HashSet<u64> = HashSet::new();
    let mut warned = false;
    loop {
        match refresh(&client, wanted, &current, &mut refused).await {
            Ok(Some(next)) => {
                tracing::info!(versions = ?next.versions(), "self-play: the opponent's models");
                current = next;
                pool.send_replace(Arc::new(current.clone()));
                warned = false;
            }
            Ok(None) => {}
            Err(e) if !warned => {
                tracing::warn!("self-play: listing the opponent's models: {e:#}; playing the models at hand (or the CPU) meanwhile");
                warned = true;
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = cancel.cancelled() => return,
        }
    }
}

/// The pool after one listing, or `None` when it is unchanged.
async fn refresh(client: &Client, wanted: Wanted, current: &Pool, refused: &mut HashSet<u64>) -> anyhow::Result<Option<Pool>> {
    let listed = client.model_versions().await?;
    let mut next = Pool::default();
    for version in listed {
        if refused.contains(&version) {
            continue;
        }
        if let Some(m) = current.models.iter().find(|(v, _)| *v == version) {
            next.models.push(m.clone());
            continue;
        }
        let bytes = match client.model(version).await {
            Ok(b) => b,
            // Pruned between the listing and the download.
            Err(e) if e.status() == Some(404) => continue,
            Err(e) => return Err(e.into()),
        };
        let net = tokio::task::spawn_blocking(move || QNet::load(&bytes)).await?;
        match net {
            Ok(net) if net.meta().side == wanted.side && net.meta().action_set == wanted.actions.name() => next.models.push((version, Arc::new(net))),
            Ok(net) => {
                tracing::warn!(version, "self-play: the opponent's model v{version} plays {} with the {} action set, not {} with {}: skipped", net.meta().side, net.meta().action_set, wanted.side, wanted.actions);
                refused.insert(version);
            }
            Err(e) => {
                tracing::warn!(version, "self-play: the opponent's model v{version} does not load: {e}; skipped");
                refused.insert(version);
            }
        }
    }
    Ok((next.versions() != current.versions()).then_some(next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use shine_agent::model::{random_weights, save, ModelMeta};

    fn net(v: u64) -> (u64, Arc<QNet>) {
        let meta = ModelMeta::new("fight", ActionSet::Fight.len()).with_side(Side::Marth);
        let bytes = save(&meta, &random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(v))).unwrap();
        (v, Arc::new(QNet::load(&bytes).unwrap()))
    }

    #[test]
    fn the_draw_follows_the_shares() {
        let sp = SelfPlay { opponent_run: "marth".into(), cpu_share: 0.2, latest_share: 0.5 };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        assert!(Pool::default().draw(&sp, 0.1, &mut rng).is_none(), "no models yet: the CPU");
        let pool = Pool { models: vec![net(9), net(7), net(4)] };
        let n = 20_000;
        let mut counts = std::collections::HashMap::new();
        for _ in 0..n {
            let v = pool.draw(&sp, 0.1, &mut rng).map(|r| r.version);
            *counts.entry(v).or_insert(0u32) += 1;
        }
        let share = |v: Option<u64>| counts.get(&v).copied().unwrap_or(0) as f64 / n as f64;
        // CPU 0.2; newest 0.8 * 0.5 = 0.4; each of the two older 0.8 * 0.5 / 2 = 0.2.
        for (v, want) in [(None, 0.2), (Some(9), 0.4), (Some(7), 0.2), (Some(4), 0.2)] {
            assert!((share(v) - want).abs() < 0.015, "{v:?}: {} vs {want}", share(v));
        }
        // A lone model is drawn whenever the CPU is not.
        let lone = Pool { models: vec![net(2)] };
        let sp = SelfPlay { cpu_share: 0.0, latest_share: 0.0, ..sp };
        assert!((0..100).all(|_| lone.draw(&sp, 0.0, &mut rng).map(|r| r.version) == Some(2)));
    }
}
