//! Play your bot: a person's match against a model over the WebSocket
//! (`GET /api/v1/play/{version}`), as the dashboard plays it: the frames streamed are
//! the simulator's for the pads sent and the model's greedy actions, the result counts
//! in the league, one match per browser, a limit on matches at once, and with private
//! reads nothing starts without the token.

mod common;

use common::*;
use futures_util::SinkExt;
use serde_json::{json, Value};
use shine_agent::model::QNet;
use shine_agent::ActionSet;
use shine_manager::play::{check, Frame};
use tokio_tungstenite::tungstenite::Message;

/// A manager training the fight task, whose matches in the browser last `secs`.
fn fight_config(dir: &std::path::Path, secs: f64) -> shine_manager::config::Config {
    let mut c = config(dir);
    c.game.task = "fight".into();
    c.game.action_set = "fight".into();
    c.play.match_secs = secs;
    c
}

/// The newest model's version and file.
async fn latest(m: &Manager) -> (u64, Vec<u8>) {
    let r = m.http.get(m.at("/api/v1/models/latest")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v = r.headers()["x-shine-model-version"].to_str().unwrap().parse().unwrap();
    (v, r.bytes().await.unwrap().to_vec())
}

/// The messages of a match to its end, the person holding right from the start, then,
/// once a frame has run on that, jumping, then, once one has run on the jump, left.
async fn play_out(ws: &mut Ws) -> (Value, Vec<Frame>, Value) {
    let hello = next_json(ws).await;
    assert_eq!(hello["type"], "hello", "{hello}");
    let pads = [json!({ "stick": [1.0, 0.0], "buttons": [] }), json!({ "stick": [0.0, 0.0], "buttons": ["x"] }), json!({ "stick": [-1.0, 0.0], "buttons": [] })];
    let mut sent = 0;
    ws.send(Message::Text(pads[0].to_string().into())).await.unwrap();
    let mut frames: Vec<Frame> = vec![];
    loop {
        let msg = next_json(ws).await;
        match msg["type"].as_str() {
            Some("frame") => {
                let f: Frame = serde_json::from_value(msg["frame"].clone()).unwrap();
                // The pad last sent has reached the match: the next one.
                if sent + 1 < pads.len() && serde_json::to_value(&f.pad).unwrap() == pads[sent] {
                    sent += 1;
                    ws.send(Message::Text(pads[sent].to_string().into())).await.unwrap();
                }
                frames.push(f);
            }
            Some("result") => return (hello, frames, msg),
            other => panic!("unexpected message {other:?}: {msg}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_plays_a_model_and_the_frames_are_the_simulators_and_the_result_is_rated() {
    let dir = tempfile::tempdir().unwrap();
    let m = Manager::start(fight_config(dir.path(), 10.0)).await;
    let (version, file) = latest(&m).await;
    let net = QNet::load(&file).unwrap();
    let mut ws = connect(&m, &format!("/api/v1/play/{version}?client=page-1")).await.unwrap();
    // A second match from the same page while this one runs is refused, saying why.
    let mut again = connect(&m, &format!("/api/v1/play/{version}?client=page-1")).await.unwrap();
    let refused = next_json(&mut again).await;
    assert_eq!((refused["type"].as_str(), refused["error"]["code"].as_str()), (Some("refused"), Some("already_playing")), "{refused}");
    let (hello, frames, result) = play_out(&mut ws).await;
    assert_eq!((hello["bot_side"].as_str(), hello["your_side"].as_str(), hello["model_version"].as_u64()), (Some("fox"), Some("marth"), Some(version)));
    assert_eq!(hello["actions"].as_array().unwrap().len(), ActionSet::Fight.len());
    // Ten seconds of the game's frames, every one of them the simulator's for the pads
    // the person sent and the model's greedy choices on the states streamed.
    assert_eq!(frames.len(), 600);
    check(&net, ActionSet::Fight, hello["seed"].as_u64().unwrap(), &frames).unwrap();
    for want in [1.0, 0.0, -1.0] {
        assert!(frames.iter().any(|f| f.pad.stick[0] == want), "the pads sent were played ({want})");
    }
    assert!(frames.iter().any(|f| f.pad.buttons == ["x"]), "the jump was played");
    // The result: played out on the clock, counted in the league as "human".
    let r = &result["result"];
    assert_eq!(r["ending"], "time", "{result}");
    // The stocks left are the last frame's (a random model may well fall off the stage).
    let last = frames.last().unwrap();
    assert_eq!((r["bot_stocks"].as_u64(), r["your_stocks"].as_u64()), (Some(u64::from(last.agent.stocks)), Some(u64::from(last.opponent.stocks))), "{result}");
    assert!(["bot", "you", "draw"].contains(&r["winner"].as_str().unwrap()));
    assert_eq!(result["league"]["you"]["player"], "human", "{result}");
    let table = m.get_json("/api/v1/league").await;
    let human = table["players"].as_array().unwrap().iter().find(|p| p["player"] == "human").expect("the people in the table").clone();
    assert_eq!((human["matches"].as_u64(), human["human"].as_bool()), (Some(1), Some(true)), "{human}");
    let model = table["players"].as_array().unwrap().iter().find(|p| p["version"].as_u64() == Some(version)).unwrap();
    assert_eq!(model["matches"], 1, "{model}");
    // The page is free to play again.
    let mut next = connect(&m, &format!("/api/v1/play/{version}?client=page-1")).await.unwrap();
    assert_eq!(next_json(&mut next).await["type"], "hello");
    m.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_at_once_are_limited_and_private_reads_need_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = fight_config(dir.path(), 60.0);
    c.play.max_matches = 1;
    c.server.public_reads = false;
    let m = Manager::start(c).await;
    let r = m.http.get(m.at("/api/v1/models/latest")).bearer_auth(TOKEN).send().await.unwrap();
    let version: u64 = r.headers()["x-shine-model-version"].to_str().unwrap().parse().unwrap();
    // Without the token nothing starts: the handshake is refused (401).
    let err = connect(&m, &format!("/api/v1/play/{version}?client=a")).await.unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");
    let mut a = connect(&m, &format!("/api/v1/play/{version}?client=a&token={TOKEN}")).await.unwrap();
    assert_eq!(next_json(&mut a).await["type"], "hello");
    // The one match this manager plays at once is on: another page is told so.
    let mut b = connect(&m, &format!("/api/v1/play/{version}?client=b&token={TOKEN}")).await.unwrap();
    let refused = next_json(&mut b).await;
    assert_eq!(refused["error"]["code"], "play_full", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("max_matches"), "{refused}");
    // Closing the page ends its match (not counted) and frees its place.
    a.close(None).await.unwrap();
    until("the closed page's match to end", async || {
        let mut c = connect(&m, &format!("/api/v1/play/{version}?client=c&token={TOKEN}")).await.unwrap();
        next_json(&mut c).await["type"] == "hello"
    })
    .await;
    // A bad client id, an unknown model: errors before the handshake.
    for (path, status) in [(format!("/api/v1/play/{version}?client=no%20spaces&token={TOKEN}"), "400"), (format!("/api/v1/play/999999?client=d&token={TOKEN}"), "404")] {
        let err = connect(&m, &path).await.unwrap_err();
        assert!(err.to_string().contains(status), "{path}: {err}");
    }
    m.stop().await.unwrap();
}
