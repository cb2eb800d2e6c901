//! Does a match played in the browser slow training? (issue 41; figures in
//! `docs/benchmarks.md`, "A match in the browser beside training".)
//!
//! ```sh
//! cargo run -p shine-manager --example play_bench -- --url http://127.0.0.1:8080 --token T [--secs 30] [--matches 1]
//! ```
//!
//! Against a manager that trains (its workers feeding it), the run's train steps per
//! second (`shine_train_steps_total`, over `--secs`) three times: with no match, with
//! `--matches` matches played over the play WebSocket as a person would (the pad
//! changing every 20 frames, so none ends for want of input), and with none again.
//! A match runs on a thread of its own (`crate::play`), never on the trainer's.

use anyhow::{bail, Context};
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

#[derive(Parser)]
#[command(about = "Train steps per second with and without a match played in the browser")]
struct Args {
    /// The manager.
    #[arg(long)]
    url: String,
    /// Its token.
    #[arg(long)]
    token: String,
    /// The run trained and played.
    #[arg(long, default_value = "default")]
    run: String,
    /// Seconds each rate is measured over.
    #[arg(long, default_value_t = 30.0)]
    secs: f64,
    /// Matches played at once in the middle window.
    #[arg(long, default_value_t = 1)]
    matches: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let http = reqwest::Client::new();
    let prefix = if a.run == "default" { "/api/v1".to_string() } else { format!("/api/v1/runs/{}", a.run) };
    let steps = || async {
        let text = http.get(format!("{}/metrics", a.url)).send().await?.text().await?;
        let want = format!("shine_train_steps_total{{run=\"{}\"}} ", a.run);
        let line = text.lines().find(|l| l.starts_with(&want)).with_context(|| format!("no {want} in /metrics"))?;
        anyhow::Ok(line[want.len()..].trim().parse::<f64>()?)
    };
    let rate = |label: &'static str| async move {
        let (s0, t0) = (steps().await?, Instant::now());
        tokio::time::sleep(Duration::from_secs_f64(a.secs)).await;
        let r = (steps().await? - s0) / t0.elapsed().as_secs_f64();
        println!("{label:<24} {r:>8.0} train steps/s");
        anyhow::Ok(r)
    };
    println!("{} run {}, {} s a window", a.url, a.run, a.secs);
    let before = rate("no match").await?;
    // The newest model (an older one may be pruned by now).
    let r = http.get(format!("{}{prefix}/models/latest", a.url)).bearer_auth(&a.token).send().await?;
    let version = r.headers().get("x-shine-model-version").context("no model published yet")?.to_str()?.to_string();
    // The matches: each a WebSocket, the pad changing every 20 frames.
    let mut sockets = vec![];
    for i in 0..a.matches {
        let url = format!("{}{prefix}/play/{version}?client=bench-{i}&token={}", a.url.replacen("http", "ws", 1), a.token);
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.context("the play WebSocket")?;
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.contains("\"hello\"") => {}
            other => bail!("match {i} did not start: {other:?}"),
        }
        sockets.push(tokio::spawn(async move {
            let mut frames = 0u64;
            while let Some(Ok(msg)) = ws.next().await {
                let Message::Text(t) = msg else { continue };
                if !t.contains("\"frame\"") {
                    break;
                }
                frames += 1;
                if frames % 20 == 1 {
                    let x = [1.0, 0.0, -1.0][(frames / 20 % 3) as usize];
                    if ws.send(Message::Text(format!("{{\"stick\": [{x}, 0], \"buttons\": []}}").into())).await.is_err() {
                        break;
                    }
                }
            }
            frames
        }));
    }
    let during = rate("with a match").await?;
    println!("(the match(es) against model v{version})");
    for s in &sockets {
        s.abort();
    }
    // The pages gone: their matches end within a frame.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rate("no match again").await?;
    println!("with {} match(es): {:+.1} % against the mean of before and after", a.matches, 100.0 * (during / ((before + after) / 2.0) - 1.0));
    Ok(())
}
