//! League matches: a small share of the worker's time playing the matches the manager
//! hands out (`POST /api/v1/league/matches`) on the simulator as `eval` plays them, and reporting
//! each result (`POST /api/v1/league/results`), from which the manager rates every
//! kept model of every run (`docs/learning.md`, "The league").
//!
//! One match at a time on a blocking thread, then a rest long enough that matches take
//! `share` of the time: a match of `d` seconds is followed by `d (1 - share) / share`
//! seconds of rest, so the environments keep the rest of the machine.

use crate::client::Client;
use crate::games::matches::{play_episode, resolve_epsilon, Matches, PolicySpec, RivalSpec};
use anyhow::{bail, Context};
use shine_agent::actions::ActionSet;
use shine_agent::model::QNet;
use shine_agent::protocol::{LeagueMatch, LeagueOutcome, LeaguePlayer, LeagueResult};
use shine_agent::task::{Outcome, Task};
use shine_agent::Side;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long to wait when the manager has no match (or cannot be reached).
const IDLE: Duration = Duration::from_secs(30);
/// Models kept between matches (the league's players are a few per run).
const CACHE: usize = 32;

/// Play league matches for `share` of the time until `cancel` fires.
pub async fn play_league(client: Client, share: f64, cancel: CancellationToken) {
    if share <= 0.0 {
        return;
    }
    let mut models: HashMap<String, Arc<QNet>> = HashMap::new();
    let mut warned = false;
    loop {
        let rest = match one_match(&client, &mut models).await {
            Ok(Some(played)) => {
                warned = false;
                played.mul_f64((1.0 - share) / share).min(Duration::from_secs(3600))
            }
            Ok(None) => IDLE,
            Err(e) => {
                if !warned {
                    tracing::warn!("league: {e:#}; trying again later");
                    warned = true;
                }
                IDLE
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(rest) => {}
            _ = cancel.cancelled() => return,
        }
    }
}

/// Ask for a match, play it, report it; how long the match took (`None`: there was none).
async fn one_match(client: &Client, models: &mut HashMap<String, Arc<QNet>>) -> anyhow::Result<Option<Duration>> {
    let Some(m) = client.league_match().await? else { return Ok(None) };
    let started = Instant::now();
    let (a, a_side) = match &m.a {
        LeaguePlayer::Model { url, side, .. } => (model(client, models, url).await?, side.parse::<Side>().map_err(anyhow::Error::msg)?),
        LeaguePlayer::Cpu { .. } => bail!("league match {}: its first player is the CPU (the manager puts a model there)", m.match_id),
    };
    let b = match &m.b {
        LeaguePlayer::Model { url, .. } => Some(model(client, models, url).await?),
        LeaguePlayer::Cpu { .. } => None,
    };
    let result = tokio::task::spawn_blocking(move || play_league_match(&m, a, a_side, b)).await??;
    client.league_result(&result).await?;
    tracing::debug!(match_id = result.match_id, outcome = ?result.outcome, "league match played");
    Ok(Some(started.elapsed()))
}

/// The model at `url`, from the cache or downloaded.
async fn model(client: &Client, models: &mut HashMap<String, Arc<QNet>>, url: &str) -> anyhow::Result<Arc<QNet>> {
    if let Some(net) = models.get(url) {
        return Ok(net.clone());
    }
    let bytes = client.file(url).await?;
    let net = Arc::new(tokio::task::spawn_blocking(move || QNet::load(&bytes)).await?.with_context(|| format!("the league's model {url} does not load"))?);
    if models.len() >= CACHE {
        models.clear();
    }
    models.insert(url.to_string(), net.clone());
    Ok(net)
}

/// Play match `m`: `a` on its side against `b` or the CPU, as `eval` plays them: greedily
/// against the CPU, each model with [`crate::games::matches::MODEL_VS_MODEL_EPSILON`] against a model.
fn play_league_match(m: &LeagueMatch, a: Arc<QNet>, side: Side, b: Option<Arc<QNet>>) -> anyhow::Result<LeagueResult> {
    let actions = ActionSet::from_name(&a.meta().action_set).with_context(|| format!("the league's model plays the unknown action set {:?}", a.meta().action_set))?;
    if a.meta().side != side {
        bail!("league match {}: the model plays {}, the manager says {side}", m.match_id, a.meta().side);
    }
    let rival = match b {
        Some(net) => {
            if net.meta().side != side.other() || net.meta().action_set != actions.name() {
                bail!("league match {}: the opponent model plays {} with {}, not {} with {actions}", m.match_id, net.meta().side, net.meta().action_set, side.other());
            }
            let version = net.meta().model_version;
            Some(RivalSpec { spec: PolicySpec::Model(Box::new(QNet::clone(&net))), actions, version, label: format!("model v{version}") })
        }
        None => None,
    };
    let cpu_level = match &m.b {
        LeaguePlayer::Cpu { cpu } => *cpu,
        _ => 9,
    };
    // `eval`'s rule: two models take a random action now and then (greedy against
    // greedy, every match of a pair would be the same one).
    let bot = PolicySpec::Model(Box::new(QNet::clone(&a)));
    let epsilon = resolve_epsilon(None, &bot, rival.as_ref());
    let matches = Matches { task: Task::Fight, side, cpu_level, rival, bot_cpu: None, episodes: 1, seed: m.seed, epsilon };
    let mut bot = bot.build(actions, epsilon);
    let r = play_episode(bot.as_mut(), actions, &matches, m.seed)?;
    let t = r.tally;
    let outcome = match t.outcome() {
        Outcome::Win => LeagueOutcome::Win,
        Outcome::Draw => LeagueOutcome::Draw,
        Outcome::Loss => LeagueOutcome::Loss,
    };
    Ok(LeagueResult {
        match_id: m.match_id,
        outcome,
        stocks_taken: t.stocks_taken,
        stocks_lost: t.stocks_lost,
        damage_dealt: t.damage_dealt as f64,
        damage_taken: t.damage_taken as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use shine_agent::model::{random_weights, save, ModelMeta};

    fn net(side: Side, seed: u64) -> Arc<QNet> {
        let meta = ModelMeta::new("fight", ActionSet::Fight.len()).with_side(side);
        Arc::new(QNet::load(&save(&meta, &random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed))).unwrap()).unwrap())
    }

    fn assignment(b: LeaguePlayer) -> LeagueMatch {
        let a = LeaguePlayer::Model { run: "fox".into(), version: 3, side: "fox".into(), url: "/api/v1/runs/fox/models/3".into() };
        LeagueMatch { match_id: 7, seed: 1_000_000, a, b }
    }

    #[test]
    fn a_match_is_the_same_match_eval_plays_and_its_result_follows_the_tally() {
        let (a, b) = (net(Side::Fox, 1), net(Side::Marth, 2));
        let m = assignment(LeaguePlayer::Model { run: "marth".into(), version: 4, side: "marth".into(), url: "/u".into() });
        let r = play_league_match(&m, a.clone(), Side::Fox, Some(b.clone())).unwrap();
        // The same match played the other way round: each side's figures mirrored.
        let back = assignment(LeaguePlayer::Model { run: "fox".into(), version: 3, side: "fox".into(), url: "/u".into() });
        let r2 = play_league_match(&back, b, Side::Marth, Some(a.clone())).unwrap();
        assert_eq!((r.stocks_taken, r.stocks_lost, r.damage_dealt), (r2.stocks_lost, r2.stocks_taken, r2.damage_taken));
        let expected = match r.stocks_taken.cmp(&r.stocks_lost).then(r.damage_dealt.total_cmp(&r.damage_taken)) {
            std::cmp::Ordering::Greater => LeagueOutcome::Win,
            std::cmp::Ordering::Equal => LeagueOutcome::Draw,
            std::cmp::Ordering::Less => LeagueOutcome::Loss,
        };
        assert_eq!((r.match_id, r.outcome), (7, expected));
        // Two models take random actions now and then: matches of other seeds differ
        // (greedy against greedy, every seed would play this same match).
        let tallies: std::collections::HashSet<_> = (0..6)
            .map(|i| {
                let m = LeagueMatch { seed: 2_000_000 + i, ..m.clone() };
                let r = play_league_match(&m, a.clone(), Side::Fox, Some(net(Side::Marth, 2))).unwrap();
                (r.stocks_taken, r.stocks_lost, r.damage_dealt.to_bits(), r.damage_taken.to_bits())
            })
            .collect();
        assert!(tallies.len() > 1, "{tallies:?}");
        // Against the level-9 CPU an untrained model loses stocks.
        let cpu = play_league_match(&assignment(LeaguePlayer::Cpu { cpu: 9 }), a.clone(), Side::Fox, None).unwrap();
        assert!(cpu.stocks_lost > 0 && cpu.damage_taken > 0.0, "{cpu:?}");
        // A model of the wrong side is refused, nothing is played.
        let e = play_league_match(&assignment(LeaguePlayer::Cpu { cpu: 9 }), net(Side::Marth, 3), Side::Fox, None).unwrap_err().to_string();
        assert!(e.contains("the model plays marth, the manager says fox"), "{e}");
    }
}
