//! The league (`crate::league`): `GET /league` (the table and the head-to-head
//! matrix; `?run=NAME` for one run's models and the anchors), `POST /league/matches`
//! (a worker asks for a match: `200` with one, `204` when there is none to play) and
//! `POST /league/results` (its result: `200` once it is stored). HTTP only: what a
//! match and a result do is `crate::league::protocol`'s.

use super::{run_prefix, Access, Route};
use crate::error::{ApiError, ApiResult};
use crate::league::protocol::{self, CountError, Counted};
use crate::league::{Assignment, Entrant, LeagueError, Player, Table, ANCHORS};
use crate::app_state::{AppState, Manager};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use shine_agent::protocol::{LeagueMatch, LeaguePlayer, LeagueResult};
use shine_agent::Task;

pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/league", Access::Read, table),
        Route::post("/league/matches", Access::Token, next_match),
        Route::post("/league/results", Access::Token, result),
    ]
}

/// The league's players now: every kept model of every fight run (with its side), and
/// the anchors; with `only`, that run's models and the anchors.
fn entrants(s: &Manager, only: Option<&str>) -> Vec<Entrant> {
    let mut out = Vec::new();
    for run in s.all_runs() {
        if run.task() != Task::Fight || only.is_some_and(|o| o != run.name()) {
            continue;
        }
        let side = run.settings().side();
        for m in run.registry().list() {
            out.push(Entrant { player: Player::Model { run: run.name().to_string(), version: m.version }, side: Some(side) });
        }
    }
    out.extend(ANCHORS.iter().map(|&cpu| Entrant { player: Player::Cpu { cpu }, side: None }));
    out
}

#[derive(Deserialize)]
struct TableQuery {
    run: Option<String>,
}

async fn table(State(s): State<AppState>, q: Result<Query<TableQuery>, QueryRejection>) -> ApiResult<Json<Table>> {
    let Query(q) = q.map_err(|r| ApiError::BadRequest { code: "bad_query", message: r.body_text() })?;
    if let Some(run) = &q.run {
        // An unknown run is a 404 naming the runs there are (the caller may read).
        s.run(run)?;
    }
    let mut entrants = entrants(&s, q.run.as_deref());
    let league = s.league.lock().expect("league lock");
    // The people are in the table once they have played (never in a worker's match).
    if league.has_played(&Player::human()) {
        entrants.push(Entrant { player: Player::human(), side: None });
    }
    Ok(Json(league.table(&entrants)))
}

fn player_view(p: &Player, side: shine_agent::Side) -> LeaguePlayer {
    match p {
        Player::Model { run, version } => {
            LeaguePlayer::Model { run: run.clone(), version: *version, side: side.name().into(), url: format!("{}/models/{version}", run_prefix(run)) }
        }
        Player::Cpu { cpu } => LeaguePlayer::Cpu { cpu: *cpu },
        // League::assign picks among the entrants, which never hold the people.
        Player::Human { .. } => unreachable!("a person's matches are played in the browser, never handed to a worker"),
    }
}

fn match_view(a: &Assignment) -> LeagueMatch {
    LeagueMatch { match_id: a.match_id, seed: a.seed, a: player_view(&a.a, a.a_side), b: player_view(&a.b, a.a_side.other()) }
}

async fn next_match(State(s): State<AppState>) -> Response {
    let entrants = entrants(&s, None);
    match protocol::hand_out(&s.league, &entrants, |l| s.keep_league_models(l)) {
        Some(a) => Json(match_view(&a)).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

async fn result(State(s): State<AppState>, body: Result<Json<LeagueResult>, JsonRejection>) -> ApiResult<Json<Counted>> {
    let Json(r) = body.map_err(|e| ApiError::Unprocessable { code: "invalid_result", message: e.body_text() })?;
    let state = s.clone();
    let counted = tokio::task::spawn_blocking(move || {
        protocol::count_result(&state.league, &r, |m| state.history.record_match(m), |l| state.keep_league_models(l))
    })
    .await
    .map_err(anyhow::Error::from)?;
    counted.map(Json).map_err(|e| match e {
        CountError::League(e @ LeagueError::UnknownMatch(_)) => ApiError::NotFound(e.to_string()),
        CountError::League(LeagueError::Invalid(message)) => ApiError::Unprocessable { code: "invalid_result", message },
        CountError::Store(e) => ApiError::Internal(e.context("storing a league match")),
    })
}
