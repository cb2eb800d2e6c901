//! Durable ingest, measured end to end (issue 12; figures in `docs/benchmarks.md`).
//!
//! ```sh
//! . scripts/env.sh
//! cargo run --release -p shine-manager --example ingest_bench -- [--secs 10] [--clients 64]
//! ```
//!
//! A real manager runs in this process on `127.0.0.1:0` with a temporary data
//! directory (`shine_manager::serve`, HTTP over loopback), and `--clients` real HTTP
//! clients (reqwest) upload 2,000-transition zstd batches played by the simulator
//! (random macro-actions, level-9 CPU: what a worker with a high epsilon uploads),
//! each with a fresh random upload id. Three measurements:
//!
//! 1. **Ingest**: transitions per second answered 202, for 64 uploaders sending as
//!    fast as they are answered, with `[wal] durability` = `fsync` (group commit),
//!    `os` and `off`; with the 503 count and the log's fsyncs (`shine_wal_fsyncs_total`)
//!    so the group commit is visible. The rate limiter never holds an upload back and
//!    the learner does not train (`samples_per_insert` = 1e-9, `insert_slack` = 0: its
//!    budget never reaches a batch), so this is the ingest path alone; one more row
//!    has the learner training flat out on the CPU beside it (`samples_per_insert` = 0).
//! 2. **Rebuild**: a log of `--rebuild-transitions` (1,000,000) accepted through the
//!    API, a graceful stop, then a new manager on the same data directory: the time
//!    from `serve` until it answers `/healthz`, and `shine_manager::storage::wal::recover` alone;
//!    each with the log in the page cache (a restart after a crash) and evicted from it
//!    first (after a reboot; GNU `dd iflag=nocache`).
//! 3. **Train steps/s under a hammered full queue**: the rate limiter on
//!    (`samples_per_insert` 8, default slacks), the learner on the CPU with one thread.
//!    `--prefill` transitions go in during burn-in, which puts the fleet so far ahead of
//!    the 8:1 ratio that the learner then trains flat out and the trainer takes no more
//!    inserts: its queue (one upload) stays full. Train steps/s are measured with no
//!    uploads; while `--clients` clients upload without pausing (each answered 503
//!    from its header, and sent again at once); while they retry 0.5 s after a 503, as
//!    shine-worker does; and with no uploads again.
//!
//! For every window the CPU time of the process's threads is shown by group (trainer,
//! log writer, the manager's runtime: HTTP and decoding, the clients' runtime), in
//! cores, from `/proc/self/task/*/schedstat`: on a small machine the clients compete
//! with the manager, and this says where the time went.

#[path = "../tests/common/serving.rs"]
mod serving;

use shine_testkit::metric;
use anyhow::{bail, Context};
use clap::Parser;
use rand::{Rng, SeedableRng};
use serving::Serving;
use shine_agent::experience::{self, BatchMeta, Header, HEADER_LEN, TRANSITION_FLOATS};
use shine_agent::{ActionSet, Env, Task};
use shine_bridge::sim::Sim;
use shine_bridge::MatchSetup;
use shine_manager::config::Config;
use shine_manager::storage::wal::{self, Durability};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "bench-token";
/// shine-worker's pause after a 503 (`worker/src/uploader.rs`, `BUSY_RETRY`).
const BUSY_RETRY: Duration = Duration::from_millis(500);

#[derive(Parser, Debug, Clone)]
struct Args {
    /// Seconds each rate is measured over (after a warm-up).
    #[arg(long, default_value_t = 10.0)]
    secs: f64,
    /// Concurrent uploaders.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Transitions per upload.
    #[arg(long, default_value_t = 2000)]
    batch: usize,
    /// Distinct simulated batches the uploads cycle through (each sent with a new id).
    #[arg(long, default_value_t = 64)]
    pool: usize,
    /// Relative noise added to every state float (e.g. 0.001), independently in each
    /// row: a pessimistic case for zstd (the simulator's own floats compress to a few
    /// percent).
    #[arg(long, default_value_t = 0.0)]
    noise: f32,
    /// Transitions in the log the rebuild reads (the replay's capacity, 1,000,000).
    #[arg(long, default_value_t = 1_000_000)]
    rebuild_transitions: usize,
    /// Transitions inserted during burn-in before the train-steps measurement.
    #[arg(long, default_value_t = 400_000)]
    prefill: usize,
    /// Measurements to run: ingest, rebuild, train (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "ingest,rebuild,train")]
    only: Vec<String>,
    /// Where the temporary data directories go (default: the system's temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,shine_manager::server=info".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init();
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Separate runtimes (and thread names) for the manager and the clients, so that the
    // CPU each side uses can be told apart.
    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).thread_name("manager").enable_all().build()?;
    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).thread_name("client").enable_all().build()?;
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);

    println!("machine: {} ({cores} cores), data dirs under {}", cpu_model(), parent.display());
    let t = Instant::now();
    let pool = Pool::simulate(args.pool, args.batch, args.noise)?;
    println!(
        "{} simulated batches of {} transitions (noise {}) in {:.1} s: {:.0} bytes per upload on average ({:.1} % of the {} raw bytes)",
        pool.bodies.len(),
        args.batch,
        args.noise,
        t.elapsed().as_secs_f64(),
        pool.mean_bytes(),
        100.0 * pool.mean_bytes() / (HEADER_LEN + args.batch * TRANSITION_FLOATS * 4) as f64,
        HEADER_LEN + args.batch * TRANSITION_FLOATS * 4
    );
    let bench = Bench { args: args.clone(), pool: Arc::new(pool), server_rt, client_rt, parent };

    if let Some(o) = args.only.iter().find(|o| !["ingest", "rebuild", "train"].contains(&o.as_str())) {
        bail!("--only {o:?}: expected ingest, rebuild or train");
    }
    let mut ingest = Vec::new();
    let mut rebuild = None;
    let mut train = None;
    if args.only.iter().any(|o| o == "ingest") {
        for (durability, learner_trains) in [(Durability::Fsync, false), (Durability::Os, false), (Durability::Off, false), (Durability::Fsync, true)] {
            ingest.push(bench.ingest(durability, learner_trains)?);
        }
    }
    if args.only.iter().any(|o| o == "rebuild") {
        rebuild = Some(bench.rebuild()?);
    }
    if args.only.iter().any(|o| o == "train") {
        train = Some(bench.train()?);
    }

    print_tables(&args, &ingest, rebuild.as_ref(), train.as_ref());
    Ok(())
}

/// The figures as Markdown tables, for docs/benchmarks.md.
fn print_tables(args: &Args, ingest: &[IngestResult], rebuild: Option<&RebuildResult>, train: Option<&TrainResult>) {
    println!("\n## Results ({} clients, {} transitions per upload, {} s windows)\n", args.clients, args.batch, args.secs);
    if !ingest.is_empty() {
        println!("| durability | learner | transitions/s acknowledged (202) | uploads/s | 503 | fsyncs/s | uploads per fsync | CPU, cores: manager / log / trainer / clients |");
        println!("|---|---|---:|---:|---:|---:|---:|---|");
        for r in ingest {
            let per_fsync = if r.fsyncs > 0 { format!("{:.1}", r.accepted as f64 / r.fsyncs as f64) } else { "-".into() };
            println!(
                "| {:?} | {} | {} | {:.0} | {} | {:.0} | {per_fsync} | {} |",
                r.durability,
                if r.learner_trains { "training" } else { "idle" },
                thousands(r.transitions_per_sec),
                r.accepted as f64 / r.secs,
                r.busy,
                r.fsyncs as f64 / r.secs,
                r.cpu.cores()
            );
        }
        println!();
    }
    if let Some(r) = rebuild {
        println!("| rebuild of {} transitions ({} uploads, log {:.0} MB) | seconds |", thousands(r.transitions as f64), r.uploads, r.log_bytes as f64 / 1e6);
        println!("|---|---:|");
        println!(
            "| new manager: `serve` until it answers /healthz, the log evicted from the page cache first (replay rows: {}) | {:.2} |",
            thousands(r.replay_rows as f64),
            r.start_to_serving[0]
        );
        println!("| the same, the log in the page cache | {:.2} |", r.start_to_serving[1]);
        println!("| `wal::recover` alone, evicted / cached | {:.2} / {:.2} |", r.recover[1], r.recover[0]);
        println!("| (filling it through the API; the graceful stop before the restart) | ({:.2}; {:.2}) |", r.fill, r.stop);
        println!();
    }
    if let Some(r) = train {
        println!("| window | train steps/s | of the windows around it | steps per trainer CPU-second | uploads answered 503 / 202 | CPU, cores: manager / log / trainer / clients |");
        println!("|---|---:|---:|---:|---:|---|");
        for (i, w) in r.windows.iter().enumerate() {
            let share = if i % 2 == 1 {
                format!("{:.1} %", 200.0 * w.steps_per_sec / (r.windows[i - 1].steps_per_sec + r.windows[i + 1].steps_per_sec))
            } else {
                String::new()
            };
            println!(
                "| {} | {:.0} | {share} | {:.0} | {} / {} | {} |",
                w.name,
                w.steps_per_sec,
                w.steps_per_sec / w.cpu.trainer,
                w.busy,
                w.accepted,
                w.cpu.cores()
            );
        }
    }
}

// ---------------------------------------------------------------------------------
// The uploads: simulated transitions, encoded once, sent with fresh upload ids.

/// Encoded uploads (zstd) of simulated play, cycled through by the clients.
struct Pool {
    bodies: Vec<Vec<u8>>,
    next: AtomicU64,
}

impl Pool {
    /// `batches` consecutive batches of `batch` transitions from one simulated worker:
    /// random macro-actions against the level-9 CPU, episodes as the Untouchable task
    /// ends them. Floats that change slowly frame to frame, as zstd sees them for real;
    /// `noise` > 0 multiplies each state float by a random `1 ± noise`.
    fn simulate(batches: usize, batch: usize, noise: f32) -> anyhow::Result<Pool> {
        let setup = MatchSetup::default();
        let actions = ActionSet::Untouchable;
        let mut env = Env::new(Sim::new(setup, 1), setup, Task::Untouchable, actions);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut episode = 0u64;
        let mut state = env.reset(9, episode)?.state;
        let mut bodies = Vec::with_capacity(batches);
        for _ in 0..batches {
            let mut data = Vec::with_capacity(batch * TRANSITION_FLOATS);
            while data.len() < batch * TRANSITION_FLOATS {
                let action = rng.random_range(0..actions.len());
                let step = env.step(action)?;
                let terminal = step.end.is_some_and(|e| e.is_terminal());
                let mut noisy = |v: &f32| if noise > 0.0 { v * (1.0 + rng.random_range(-noise..noise)) } else { *v };
                data.extend(state.iter().map(&mut noisy));
                data.extend_from_slice(&[action as f32, step.reward]);
                data.extend(step.next.state.iter().map(&mut noisy));
                data.push(if terminal { 1.0 } else { 0.0 });
                state = step.next.state;
                if step.end.is_some() {
                    episode += 1;
                    state = env.reset(9, episode)?.state;
                }
            }
            let meta = BatchMeta { worker_id: 1, model_version: 1, n_step: 1, upload_id: [0; 16] };
            bodies.push(experience::encode(&meta, &data, true));
        }
        Ok(Pool { bodies, next: AtomicU64::new(0) })
    }

    /// The next batch, under a new random upload id.
    fn next_upload(&self) -> Vec<u8> {
        let i = self.next.fetch_add(1, Relaxed) as usize % self.bodies.len();
        let mut body = self.bodies[i].clone();
        let mut header = Header::parse(&body).expect("encoded by us");
        header.meta.upload_id = rand::random::<u128>().max(1).to_le_bytes();
        body[..HEADER_LEN].copy_from_slice(&header.to_bytes());
        body
    }

    fn mean_bytes(&self) -> f64 {
        self.bodies.iter().map(|b| b.len()).sum::<usize>() as f64 / self.bodies.len() as f64
    }
}

// ---------------------------------------------------------------------------------
// A manager in this process, and the clients that upload to it.

struct Bench {
    args: Args,
    pool: Arc<Pool>,
    /// The manager's runtime (threads named "manager") and the clients' ("client").
    server_rt: Runtime,
    client_rt: Runtime,
    parent: PathBuf,
}

/// The manager under test, served on the bench's server runtime, and the clients' HTTP client.
struct Manager {
    http: reqwest::Client,
    serving: Serving,
}

/// What the clients got back.
#[derive(Default)]
struct Answers {
    /// Uploads answered 202, 503, and anything else.
    accepted: AtomicU64,
    busy: AtomicU64,
    other: AtomicU64,
    /// New uploads still to be sent (a fill stops when none are left).
    tickets: AtomicI64,
}

impl Answers {
    fn counts(&self) -> (u64, u64) {
        (self.accepted.load(Relaxed), self.busy.load(Relaxed))
    }
}

impl Bench {
    /// The configuration every measurement starts from: the CPU, one libtorch thread,
    /// a replay of 1,000,000 (the default), no checkpoints (they would land in one
    /// window and not another).
    fn config(&self, data_dir: &Path) -> Config {
        let mut c = Config::default();
        c.server.data_dir = data_dir.to_path_buf();
        c.server.token = Some(TOKEN.into());
        c.trainer.device = "cpu".into();
        c.trainer.threads = 1;
        c.trainer.checkpoint_every = 0;
        c.trainer.checkpoint_every_secs = 0.0;
        c
    }

    /// Inserts never held back by the rate limiter, the queue far larger than needed
    /// (2,000,000 transitions), and the learner idle (a ratio of 1e-9 never buys a
    /// batch) or, with `learner_trains`, training flat out (the limiter off).
    fn ingest_config(&self, data_dir: &Path, durability: Durability, learner_trains: bool) -> Config {
        let mut c = self.config(data_dir);
        c.wal.durability = durability;
        c.trainer.ingest_queue_transitions = 2_000_000;
        if learner_trains {
            c.trainer.samples_per_insert = 0.0;
        } else {
            c.trainer.samples_per_insert = 1e-9;
            c.trainer.rate_slack = 0;
            c.trainer.insert_slack = 0;
        }
        c
    }

    fn start(&self, config: Config) -> anyhow::Result<(Manager, f64)> {
        let t = Instant::now();
        let serving = Serving::spawn(self.server_rt.handle(), config)?;
        let m = Manager { http: reqwest::Client::new(), serving };
        // The listener is bound already: connections wait in its backlog until the
        // manager has rebuilt its replay and started serving.
        self.client_rt.block_on(m.serving.healthy(&m.http))?;
        Ok((m, t.elapsed().as_secs_f64()))
    }

    /// Graceful stop (queue drained into the replay, final checkpoint); its duration.
    fn stop(&self, m: Manager) -> anyhow::Result<f64> {
        let t = Instant::now();
        self.client_rt.block_on(m.serving.stop())?;
        Ok(t.elapsed().as_secs_f64())
    }

    fn metrics(&self, m: &Manager) -> anyhow::Result<String> {
        self.client_rt.block_on(async { Ok(m.http.get(format!("{}/metrics", m.serving.url)).send().await?.error_for_status()?.text().await?) })
    }

    /// Answers to collect, for at most `tickets` new uploads.
    fn answers(tickets: i64) -> Arc<Answers> {
        Arc::new(Answers { tickets: AtomicI64::new(tickets), ..Default::default() })
    }

    /// `--clients` uploaders. Each sends one upload after another, and an upload
    /// answered 503 again after `busy_pause` (zero: at once), until `stop` or until
    /// `answers.tickets` runs out (each new upload takes one).
    fn spawn_clients(&self, m: &Manager, answers: &Arc<Answers>, stop: &CancellationToken, busy_pause: Duration) -> Vec<tokio::task::JoinHandle<()>> {
        let url = format!("{}/api/v1/experience", m.serving.url);
        (0..self.args.clients)
            .map(|_| {
                let (http, url, pool, answers, stop) = (m.http.clone(), url.clone(), self.pool.clone(), answers.clone(), stop.clone());
                self.client_rt.spawn(async move {
                    let mut body = None;
                    while !stop.is_cancelled() {
                        let upload: Vec<u8> = match body.take() {
                            Some(b) => b,
                            None if answers.tickets.fetch_sub(1, Relaxed) <= 0 => return,
                            None => pool.next_upload(),
                        };
                        let sent = http.post(&url).bearer_auth(TOKEN).header("content-type", "application/octet-stream").body(upload.clone()).send();
                        let r = tokio::select! {
                            r = sent => r,
                            () = stop.cancelled() => return,
                        };
                        match r {
                            Ok(r) if r.status() == 202 => {
                                answers.accepted.fetch_add(1, Relaxed);
                            }
                            Ok(r) if r.status() == 503 => {
                                answers.busy.fetch_add(1, Relaxed);
                                body = Some(upload);
                                if !busy_pause.is_zero() {
                                    tokio::select! {
                                        () = tokio::time::sleep(busy_pause) => {}
                                        () = stop.cancelled() => return,
                                    }
                                }
                            }
                            Ok(r) => {
                                if answers.other.fetch_add(1, Relaxed) == 0 {
                                    eprintln!("an upload was answered {}: {}", r.status(), r.text().await.unwrap_or_default());
                                }
                            }
                            Err(e) => {
                                if answers.other.fetch_add(1, Relaxed) == 0 {
                                    eprintln!("an upload failed: {e}");
                                }
                            }
                        }
                    }
                })
            })
            .collect()
    }

    fn join(&self, clients: Vec<tokio::task::JoinHandle<()>>) {
        self.client_rt.block_on(async {
            for c in clients {
                let _ = c.await;
            }
        });
    }

    /// Upload until `uploads` were accepted; seconds taken.
    fn fill(&self, m: &Manager, uploads: usize) -> anyhow::Result<f64> {
        let t = Instant::now();
        let answers = Bench::answers(uploads as i64);
        let stop = CancellationToken::new();
        let clients = self.spawn_clients(m, &answers, &stop, Duration::ZERO);
        self.join(clients);
        let (accepted, _) = answers.counts();
        if accepted < uploads as u64 {
            bail!("only {accepted} of {uploads} uploads were accepted");
        }
        Ok(t.elapsed().as_secs_f64())
    }

    fn tempdir(&self) -> anyhow::Result<tempfile::TempDir> {
        tempfile::Builder::new().prefix("shine-ingest-bench").tempdir_in(&self.parent).context("creating a temporary data directory")
    }

    // -----------------------------------------------------------------------------
    // 1. Ingest.

    fn ingest(&self, durability: Durability, learner_trains: bool) -> anyhow::Result<IngestResult> {
        let dir = self.tempdir()?;
        let (m, _) = self.start(self.ingest_config(dir.path(), durability, learner_trains))?;
        let answers = Bench::answers(i64::MAX);
        let stop = CancellationToken::new();
        let clients = self.spawn_clients(&m, &answers, &stop, Duration::ZERO);
        std::thread::sleep(Duration::from_secs(1));
        let (f0, (a0, b0), cpu0, t0) = (fsyncs(&self.metrics(&m)?), answers.counts(), Cpu::now(), Instant::now());
        std::thread::sleep(Duration::from_secs_f64(self.args.secs));
        let (f1, (a1, b1), cpu1, secs) = (fsyncs(&self.metrics(&m)?), answers.counts(), Cpu::now(), t0.elapsed().as_secs_f64());
        stop.cancel();
        self.join(clients);
        let text = self.metrics(&m)?;
        self.stop(m)?;
        let r = IngestResult {
            durability,
            learner_trains,
            secs,
            accepted: a1 - a0,
            busy: b1 - b0,
            fsyncs: f1 - f0,
            transitions_per_sec: ((a1 - a0) * self.args.batch as u64) as f64 / secs,
            cpu: cpu1.since(&cpu0, secs),
        };
        println!(
            "ingest, durability {:?}, learner {}: {} transitions/s acknowledged ({} uploads in {secs:.1} s), {} answered 503, {} other; {} fsyncs; log on disk at the end {:.0} MB; CPU in cores: {}",
            durability,
            if learner_trains { "training" } else { "idle" },
            thousands(r.transitions_per_sec),
            r.accepted,
            r.busy,
            answers.other.load(Relaxed),
            r.fsyncs,
            metric(&text, "shine_wal_bytes").unwrap_or(0.0) / 1e6,
            r.cpu.cores()
        );
        Ok(r)
    }

    // -----------------------------------------------------------------------------
    // 2. Rebuild.

    fn rebuild(&self) -> anyhow::Result<RebuildResult> {
        let dir = self.tempdir()?;
        let wal_dir = dir.path().join("wal");
        let config = self.ingest_config(dir.path(), Durability::Fsync, false);
        let uploads = self.args.rebuild_transitions.div_ceil(self.args.batch);
        let (m, _) = self.start(config.clone())?;
        let fill = self.fill(&m, uploads)?;
        let stop = self.stop(m)?;
        let log_bytes: u64 = std::fs::read_dir(&wal_dir)?.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();

        // The log alone: read, check, decode the newest `capacity` transitions; with the
        // log in the page cache (it was just written), then with it evicted first.
        let action_set = config.game.action_set()?;
        let expect = shine_manager::trainer::wire_expect(&config.dqn, action_set);
        let meta = wal::WalMeta::new(action_set.name(), expect);
        let mut recover = [0.0; 2];
        for (i, evicted) in [false, true].into_iter().enumerate() {
            if evicted {
                evict(&wal_dir)?;
            }
            let t = Instant::now();
            let rec = wal::recover(&wal_dir, &meta, config.replay.capacity, expect)?;
            recover[i] = t.elapsed().as_secs_f64();
            if rec.rows.len() / TRANSITION_FLOATS != (uploads * self.args.batch).min(config.replay.capacity) {
                eprintln!("warning: recover found {} rows", rec.rows.len() / TRANSITION_FLOATS);
            }
        }

        // A whole manager, from `serve` to answering: the log evicted first (a restart
        // after a reboot), then cached (a restart after a crash or a stop).
        let mut start_to_serving = [0.0; 2];
        let mut replay_rows = 0;
        for (i, evicted) in [true, false].into_iter().enumerate() {
            if evicted {
                evict(&wal_dir)?;
            }
            let (m, secs) = self.start(config.clone())?;
            start_to_serving[i] = secs;
            let text = self.metrics(&m)?;
            replay_rows = metric(&text, "shine_replay_size").unwrap_or(0.0) as usize + metric(&text, "shine_replay_staged").unwrap_or(0.0) as usize;
            self.stop(m)?;
            if replay_rows != (uploads * self.args.batch).min(config.replay.capacity) {
                eprintln!("warning: the restarted replay holds {replay_rows} rows, not the {} accepted", uploads * self.args.batch);
            }
        }
        println!(
            "rebuild: {uploads} uploads filled in {fill:.2} s, stopped in {stop:.2} s; log {:.0} MB; recover alone {:.2} s cached, {:.2} s evicted; \
             a new manager served after {:.2} s (log evicted), {:.2} s (cached), with {replay_rows} rows in its replay",
            log_bytes as f64 / 1e6,
            recover[0],
            recover[1],
            start_to_serving[0],
            start_to_serving[1]
        );
        Ok(RebuildResult { transitions: uploads * self.args.batch, uploads, log_bytes, fill, stop, recover, start_to_serving, replay_rows })
    }

    // -----------------------------------------------------------------------------
    // 3. Train steps/s under a hammered full queue.

    fn train(&self) -> anyhow::Result<TrainResult> {
        let dir = self.tempdir()?;
        let mut c = self.config(dir.path());
        let prefill = self.args.prefill.div_ceil(self.args.batch) * self.args.batch;
        c.trainer.samples_per_insert = 8.0;
        c.trainer.burn_in = prefill;
        // One upload fills the queue (an empty queue always takes one).
        c.trainer.ingest_queue_transitions = self.args.batch as u64;
        // Train steps are read back every 10 steps (the count's resolution).
        c.trainer.stats_every = 10;
        let (batch_size, insert_slack) = (c.dqn.batch_size as f64, c.trainer.insert_slack as f64);
        let (m, _) = self.start(c)?;
        let t = Instant::now();
        self.fill(&m, prefill / self.args.batch)?;
        println!("train: {prefill} transitions inserted during burn-in in {:.1} s", t.elapsed().as_secs_f64());
        let steps = |text: &str| metric(text, "shine_train_steps_total").unwrap_or(0.0);
        while steps(&self.metrics(&m)?) < 1.0 {
            std::thread::sleep(Duration::from_millis(50));
        }

        let mut windows = Vec::new();
        let n = self.args.clients;
        // Each loaded window between two without uploads, so that it is compared with
        // the learner's rate just before and just after it.
        let windows_to_run = [
            ("no uploads".to_string(), None),
            (format!("{n} clients hammering the full queue (a 503 retried at once)"), Some(Duration::ZERO)),
            ("no uploads".to_string(), None),
            (format!("{n} clients retrying 0.5 s after a 503 (as shine-worker does)"), Some(BUSY_RETRY)),
            ("no uploads".to_string(), None),
        ];
        for (name, busy_pause) in windows_to_run {
            let answers = Bench::answers(i64::MAX);
            let stop = CancellationToken::new();
            let clients = busy_pause.map_or_else(Vec::new, |pause| self.spawn_clients(&m, &answers, &stop, pause));
            std::thread::sleep(Duration::from_secs(2));
            let (s0, (a0, b0), cpu0, t0) = (steps(&self.metrics(&m)?), answers.counts(), Cpu::now(), Instant::now());
            std::thread::sleep(Duration::from_secs_f64(self.args.secs));
            let (s1, (a1, b1), cpu1, secs) = (steps(&self.metrics(&m)?), answers.counts(), Cpu::now(), t0.elapsed().as_secs_f64());
            stop.cancel();
            self.join(clients);
            let w = Window { name, steps_per_sec: (s1 - s0) / secs, accepted: a1 - a0, busy: b1 - b0, cpu: cpu1.since(&cpu0, secs) };
            println!(
                "train, {}: {:.0} steps/s ({:.0} per second of the trainer's CPU); {} answered 503, {} 202; CPU in cores: {}",
                w.name,
                w.steps_per_sec,
                w.steps_per_sec / w.cpu.trainer,
                w.busy,
                w.accepted,
                w.cpu.cores()
            );
            windows.push(w);
        }
        // The learner trained flat out only while the fleet was ahead of the ratio.
        let sampled = steps(&self.metrics(&m)?) * batch_size;
        if sampled + batch_size > 8.0 * (prefill as f64 - insert_slack) {
            eprintln!("warning: the learner caught up with the 8:1 ratio during the run (raise --prefill): it may have waited, and the queue may have drained");
        }
        self.stop(m)?;
        Ok(TrainResult { windows })
    }
}

struct IngestResult {
    durability: Durability,
    learner_trains: bool,
    secs: f64,
    accepted: u64,
    busy: u64,
    fsyncs: u64,
    transitions_per_sec: f64,
    cpu: CpuShare,
}

struct RebuildResult {
    transitions: usize,
    uploads: usize,
    log_bytes: u64,
    fill: f64,
    stop: f64,
    /// Log cached, log evicted.
    recover: [f64; 2],
    /// Log evicted, log cached.
    start_to_serving: [f64; 2],
    replay_rows: usize,
}

struct Window {
    name: String,
    steps_per_sec: f64,
    accepted: u64,
    busy: u64,
    cpu: CpuShare,
}

struct TrainResult {
    windows: Vec<Window>,
}

// ---------------------------------------------------------------------------------
// Small helpers: metrics, CPU time by thread, the machine.

/// Drop the page cache of the files in `dir` (GNU dd's `iflag=nocache`), so that the
/// next read comes from the disk, as after a reboot.
fn evict(dir: &Path) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let ok = std::process::Command::new("dd")
            .arg(format!("if={}", p.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            bail!("could not evict {} from the page cache (GNU dd's iflag=nocache)", p.display());
        }
    }
    Ok(())
}

/// The log's fsyncs, summed over the runs (the counter is labelled by run).
fn fsyncs(text: &str) -> u64 {
    let name = "shine_wal_fsyncs_total";
    let values = text.lines().filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '{'])));
    values.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>() as u64
}

/// CPU seconds of this process's threads, by group; and of the whole machine: busy,
/// waiting for the disk, stolen by the hypervisor (`/proc/stat`, USER_HZ = 100).
struct Cpu {
    by_group: BTreeMap<&'static str, f64>,
    process: f64,
    machine_busy: f64,
    machine_iowait: f64,
    machine_steal: f64,
}

impl Cpu {
    fn group(comm: &str) -> &'static str {
        match comm {
            "shine-trainer" => "trainer",
            "shine-wal" => "log",
            c if c.starts_with("manager") => "manager",
            c if c.starts_with("client") => "clients",
            _ => "other",
        }
    }

    fn now() -> Cpu {
        let mut by = BTreeMap::new();
        for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
            let p = task.path();
            let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            // The first field of schedstat: nanoseconds on a CPU.
            let ns: f64 = std::fs::read_to_string(p.join("schedstat")).ok().and_then(|s| s.split_whitespace().next()?.parse().ok()).unwrap_or(0.0);
            *by.entry(Cpu::group(comm.trim())).or_insert(0.0) += ns / 1e9;
        }
        let ticks = |text: String, skip: usize, take: usize| -> Vec<f64> {
            text.split_whitespace().skip(skip).take(take).map(|v| v.parse::<f64>().unwrap_or(0.0) / 100.0).collect()
        };
        // /proc/self/stat after the command name: utime and stime are fields 12 and 13.
        let own = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let own = own.rsplit_once(')').map_or(String::new(), |(_, rest)| rest.to_string());
        let process = ticks(own, 11, 2).iter().sum();
        // cpu  user nice system idle iowait irq softirq steal
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let m = ticks(stat.lines().next().unwrap_or_default().to_string(), 1, 8);
        let m = |i: usize| m.get(i).copied().unwrap_or(0.0);
        Cpu { by_group: by, process, machine_busy: m(0) + m(1) + m(2) + m(5) + m(6), machine_iowait: m(4), machine_steal: m(7) }
    }

    /// Cores used per group between `before` and now (threads that ended in between
    /// are not counted).
    fn since(&self, before: &Cpu, secs: f64) -> CpuShare {
        let d = |g: &str| (self.by_group.get(g).unwrap_or(&0.0) - before.by_group.get(g).unwrap_or(&0.0)).max(0.0) / secs;
        let process = (self.process - before.process) / secs;
        CpuShare {
            manager: d("manager"),
            log: d("log"),
            trainer: d("trainer"),
            clients: d("clients"),
            other: d("other"),
            elsewhere: ((self.machine_busy - before.machine_busy) / secs - process).max(0.0),
            iowait: (self.machine_iowait - before.machine_iowait) / secs,
            steal: (self.machine_steal - before.machine_steal) / secs,
        }
    }
}

struct CpuShare {
    manager: f64,
    log: f64,
    trainer: f64,
    clients: f64,
    other: f64,
    /// Cores busy in other processes (or the kernel) meanwhile; cores idle waiting for the disk.
    elsewhere: f64,
    iowait: f64,
    /// Cores the hypervisor gave to other machines while this one wanted them.
    steal: f64,
}

impl CpuShare {
    fn cores(&self) -> String {
        let total = self.manager + self.log + self.trainer + self.clients + self.other;
        format!(
            "{:.2} / {:.2} / {:.2} / {:.2} (all: {total:.2}; other processes: {:.2}, iowait: {:.2}, steal: {:.2})",
            self.manager, self.log, self.trainer, self.clients, self.elsewhere, self.iowait, self.steal
        )
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into())
}

/// 1234567.8 -> "1,234,568".
fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
