//! The actor on a thread of its own, as `shine-worker run` starts it, with the test
//! holding the other ends of its channels: the one harness of the actor's tests and of
//! `examples/envs_bench.rs` (which includes this folder with `#[path]`).
//!
//! [`Harness::start`] spawns [`run_actor`]; the test watches [`Harness::counters`],
//! sends models, and either reads the batches and episode reports itself
//! ([`Output::Kept`]) or lets threads consume and drop them as the uploader would
//! ([`Output::Consumed`]); [`Harness::stop`] cancels the actor, takes what it hands over
//! while it finishes, and joins it.

use shine_agent::model::QNet;
use shine_agent::protocol::EpisodeReport;
use shine_bridge::Emulator;
use shine_worker::pipeline::actor::{run_actor, ActorConfig, ActorIo, Model, Output as ActorOutput};
use shine_worker::games::duel::Seats;
use shine_worker::pipeline::selfplay::Pool;
use shine_worker::pipeline::batcher::RawBatch;
use shine_worker::pipeline::shared::ActorCounters;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::mpsc::{Receiver, Sender};
use tokio_util::sync::CancellationToken;

/// Room for episode reports: the actor drops a report it cannot hand over at once.
const EPISODES: usize = 1 << 16;

/// Who takes what the actor hands over.
pub enum Output {
    /// The test, through [`Harness::batches`] and [`Harness::episodes`]; `batches` is
    /// the batch channel's capacity (the actor blocks when it is full, as it does when
    /// the uploader stops taking batches).
    Kept { batches: usize },
    /// Threads that drop everything as it comes (nothing accumulates in memory).
    Consumed,
}

pub struct Harness {
    pub counters: Arc<ActorCounters>,
    /// A model sent here is swapped in between two decisions.
    pub models: Sender<Model>,
    /// The networks the actor hands back after a swap (to load the next model into).
    pub spares: Receiver<QNet>,
    batches: Option<Receiver<RawBatch>>,
    episodes: Option<Receiver<EpisodeReport>>,
    sinks: Vec<JoinHandle<()>>,
    cancel: CancellationToken,
    actor: JoinHandle<anyhow::Result<()>>,
}

/// What was still in the channels when the actor stopped (nothing with [`Output::Consumed`]).
pub struct Leftover {
    pub batches: Vec<RawBatch>,
    pub episodes: Vec<EpisodeReport>,
}

impl Harness {
    /// Start the actor with `make` building environment i, `model` as its first model
    /// and `epsilon` as its exploration rate.
    pub fn start<E, F>(cfg: ActorConfig, make: F, model: Model, epsilon: f64, output: Output) -> Harness
    where
        E: Emulator + Seats,
        F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
    {
        Self::start_with(cfg, make, model, epsilon, output, None)
    }

    /// [`Harness::start`] for self-play: rivals from `pool`; their transitions arrive on
    /// the returned channel (room for `batches`, as [`Output::Kept`]).
    pub fn start_selfplay<E, F>(cfg: ActorConfig, make: F, model: Model, epsilon: f64, batches: usize, pool: Pool) -> (Harness, Receiver<RawBatch>)
    where
        E: Emulator + Seats,
        F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
    {
        let (tx, rx) = tokio::sync::mpsc::channel(batches);
        // The sender may drop at once: the actor keeps its receiver's last value.
        let (_, pool) = tokio::sync::watch::channel(std::sync::Arc::new(pool));
        let rival = (pool, ActorOutput { batches: tx, counters: Arc::new(ActorCounters::default()) });
        (Self::start_with(cfg, make, model, epsilon, Output::Kept { batches }, Some(rival)), rx)
    }

    fn start_with<E, F>(
        cfg: ActorConfig,
        make: F,
        model: Model,
        epsilon: f64,
        output: Output,
        rival: Option<(tokio::sync::watch::Receiver<Arc<Pool>>, ActorOutput)>,
    ) -> Harness
    where
        E: Emulator + Seats,
        F: Fn(usize) -> anyhow::Result<E> + Send + Sync + 'static,
    {
        let capacity = match output {
            Output::Kept { batches } => batches,
            // Two, as `run` hands them over (`run::HANDOVER_BATCHES`).
            Output::Consumed => shine_worker::run::HANDOVER_BATCHES,
        };
        let (batch_tx, mut batch_rx) = tokio::sync::mpsc::channel(capacity);
        let (episode_tx, mut episode_rx) = tokio::sync::mpsc::channel(EPISODES);
        let (models, model_rx) = tokio::sync::mpsc::channel(1);
        let (spare_tx, spares) = tokio::sync::mpsc::channel(2);
        let counters = Arc::new(ActorCounters::default());
        counters.set_epsilon(epsilon);
        let cancel = CancellationToken::new();
        let actor = {
            let (counters, cancel) = (counters.clone(), cancel.clone());
            let (pool, rival) = rival.unzip();
            let outputs = std::iter::once(ActorOutput { batches: batch_tx, counters: counters.clone() }).chain(rival).collect();
            let io = ActorIo { outputs, episodes: episode_tx, models: model_rx, live: None, spares: Some(spare_tx), pool };
            std::thread::spawn(move || run_actor(cfg, make, model, io, counters, cancel))
        };
        let (batches, episodes, sinks) = match output {
            Output::Kept { .. } => (Some(batch_rx), Some(episode_rx), vec![]),
            Output::Consumed => {
                let sinks = vec![
                    std::thread::spawn(move || while batch_rx.blocking_recv().is_some() {}),
                    std::thread::spawn(move || while episode_rx.blocking_recv().is_some() {}),
                ];
                (None, None, sinks)
            }
        };
        Harness { counters, models, spares, batches, episodes, sinks, cancel, actor }
    }

    /// The batches the actor hands over ([`Output::Kept`] only).
    pub fn batches(&mut self) -> &mut Receiver<RawBatch> {
        self.batches.as_mut().expect("started with Output::Kept")
    }

    /// The episode reports ([`Output::Kept`] only).
    pub fn episodes(&mut self) -> &mut Receiver<EpisodeReport> {
        self.episodes.as_mut().expect("started with Output::Kept")
    }

    /// Cancel the actor and wait for it to stop cleanly (it panics otherwise), taking
    /// what it hands over meanwhile (it may be blocked on a full batch channel).
    pub fn stop(self) -> Leftover {
        self.cancel.cancel();
        let (batches, episodes) = (collect(self.batches), collect(self.episodes));
        self.actor.join().unwrap().expect("the actor stops cleanly");
        for s in self.sinks {
            s.join().unwrap();
        }
        Leftover { batches: batches.join().unwrap(), episodes: episodes.join().unwrap() }
    }
}

/// Everything `rx` still yields until its senders are gone, taken on a thread.
fn collect<T: Send + 'static>(rx: Option<Receiver<T>>) -> JoinHandle<Vec<T>> {
    std::thread::spawn(move || match rx {
        Some(mut rx) => std::iter::from_fn(|| rx.blocking_recv()).collect(),
        None => vec![],
    })
}
