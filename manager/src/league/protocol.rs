//! How the league meets the rest of the manager: a match handed to a worker, a worker's
//! result and a person's match counted, and the league opened at start.
//!
//! The order is the promise the API makes. A worker's result is **taken** (only for a
//! match handed out and not yet answered), **stored** in the history database (the
//! answer's 2xx means it is kept), then **applied** to the ratings, or **put back**
//! when it could not be stored (the worker's retry can then count it); after every
//! change the runs' registries are told which models the league needs kept
//! (**re-pinned**: the best rated, and those in matches not yet counted, which must stay
//! downloadable). At start the stored matches are **replayed** in order.
//!
//! The manager's storage and registries come in as closures (`store`, `repin`): the
//! history and the runs know the league's types, so the league does not import them.
//! The HTTP handlers (`api/league.rs`, `api/play.rs`) only extract, call these and map
//! the errors.

use super::{Assignment, Entrant, League, LeagueError, Player, Recorded};
use serde::Serialize;
use shine_agent::durable::unix_now;
use shine_agent::protocol::LeagueResult;
use shine_agent::Side;
use std::sync::Mutex;
use std::time::Instant;

/// A player's rating after a match was counted.
#[derive(Debug, Clone, Serialize)]
pub struct Rated {
    /// [`Player::label`].
    pub player: String,
    pub rating: f64,
    pub deviation: f64,
}

/// A match counted: both players' ratings after it, and the matches counted in all.
#[derive(Debug, Clone, Serialize)]
pub struct Counted {
    pub a: Rated,
    pub b: Rated,
    pub matches: u64,
}

/// Why a worker's result was not counted.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    /// Not a match waiting for a result, or not a valid result for it.
    #[error(transparent)]
    League(#[from] LeagueError),
    /// It could not be stored; it was put back, so a retry can count it.
    #[error("storing a league match: {0:#}")]
    Store(anyhow::Error),
}

/// The league at start: the stored matches replayed in order. An unreadable history
/// starts an empty league (logged): the league is never a reason not to train.
pub fn open(stored: anyhow::Result<Vec<Recorded>>) -> League {
    let played = stored.unwrap_or_else(|e| {
        tracing::error!(error = format!("{e:#}"), "reading the league's matches from the history; the league starts empty");
        Vec::new()
    });
    League::new(&played)
}

/// A match for the worker that asks, among `entrants` (`None`: none to play); its
/// models re-pinned, so that they stay downloadable until its result is counted or it
/// expires.
pub fn hand_out(league: &Mutex<League>, entrants: &[Entrant], repin: impl Fn(&League)) -> Option<Assignment> {
    let mut league = league.lock().expect("league lock");
    let assigned = league.assign(entrants, Instant::now(), &mut rand::rng());
    repin(&league);
    assigned
}

/// Count a worker's result: take, store, apply (or put back), re-pin. Blocking (`store`
/// writes to disk); the league is not locked while it stores.
pub fn count_result(league: &Mutex<League>, result: &LeagueResult, store: impl FnOnce(&Recorded) -> anyhow::Result<()>, repin: impl Fn(&League)) -> Result<Counted, CountError> {
    let m = league.lock().expect("league lock").take(result, Instant::now(), unix_now())?;
    let stored = store(&m);
    let mut league = league.lock().expect("league lock");
    if let Err(e) = stored {
        league.put_back(&m, Instant::now());
        return Err(CountError::Store(e));
    }
    Ok(apply(&mut league, &m, repin))
}

/// Count a match a person played out against `model` (playing `side`) with `result`
/// (the model's): record, store, apply, re-pin. Blocking (`store` writes to disk).
pub fn count_person(
    league: &Mutex<League>,
    model: Player,
    side: Side,
    result: LeagueResult,
    store: impl FnOnce(&Recorded) -> anyhow::Result<()>,
    repin: impl Fn(&League),
) -> anyhow::Result<Counted> {
    let m = league.lock().expect("league lock").record_person(model, side, result, unix_now());
    store(&m)?;
    Ok(apply(&mut league.lock().expect("league lock"), &m, repin))
}

/// Apply a stored match, re-pin, and say what it did to the ratings.
fn apply(league: &mut League, m: &Recorded, repin: impl Fn(&League)) -> Counted {
    league.apply(m);
    repin(league);
    let rated = |p: &Player| {
        let (rating, deviation) = league.rating(p);
        Rated { player: p.label(), rating, deviation }
    };
    Counted { a: rated(&m.a), b: rated(&m.b), matches: league.matches() }
}
