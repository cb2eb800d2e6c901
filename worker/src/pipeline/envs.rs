//! The environment threads: each environment (one emulator) on a thread of its own,
//! doing what the actor commands and answering with what happened.
//!
//! ```text
//! actor ─ Cmd::Reset | Cmd::Step(action, live decision) ─► env thread i ─► Reply::{Ready, Stepped, Cut, Failed, Fatal}
//! ```
//! The loop ends when the actor drops its command sender (shutdown).
//!
//! **Self-play.** A reset may seat a rival model on the other side (a [`Pick`] from the
//! opponent run's models, seated as a [`Rival`] in the simulator's
//! [`crate::games::duel::Duel`]); each step then also answers with the rival's
//! transitions, which the actor sends to the opponent's run.
//!
//! **A pause cuts the episode.** An emulator that runs on while the bot does not decide
//! (Dolphin, while the actor waits on a busy manager, a slow model swap or a stalled
//! machine) plays frames on a stale pad. A step during which [`CUT_AFTER_FRAMES`] or
//! more such frames ran is not a decision the bot made: it is answered
//! [`Reply::Cut`], and the actor ends the episode there as a truncation at the last
//! state the bot decided on. The simulator holds still while nobody steps it, so it is
//! never cut.

use crate::games::duel::{Rival, RivalMove, Seats};
use crate::pipeline::live::{LiveDecision, LiveTap, Pacer};
use shine_agent::model::QNet;
use shine_agent::policy::EpsilonGreedy;
use shine_agent::{ActionSet, Env, Move, Observation, Task};
use shine_bridge::{Emulator, MatchSetup};
use std::sync::{mpsc, Arc};

/// What every environment plays: the match, the task and the action set.
#[derive(Debug, Clone, Copy)]
pub struct Game {
    pub setup: MatchSetup,
    pub task: Task,
    pub actions: ActionSet,
}

/// One of the opponent run's models, picked to play the other side for one episode
/// (self-play), exploring at `epsilon`; its transitions come back with each step.
#[derive(Clone)]
pub struct Pick {
    pub net: Arc<QNet>,
    pub version: u64,
    pub epsilon: f64,
}

impl Pick {
    /// The rival to seat, choosing among `actions`.
    fn rival(self, actions: ActionSet) -> Rival {
        Rival { policy: Box::new(EpsilonGreedy::new(self.net, self.epsilon)), actions, model_version: self.version }
    }
}

pub enum Cmd {
    Reset {
        cpu_level: u8,
        seed: u64,
        /// `None`: the scripted CPU plays the other side.
        rival: Option<Pick>,
    },
    /// Play an action; with a decision (env 0, watched): paced to real time and recorded.
    Step(usize, Option<LiveDecision>),
}

/// Frames run without the bot's decision, within one step, that make it a pause rather
/// than a few skipped frames: half a second of game time.
pub const CUT_AFTER_FRAMES: u64 = 30;

pub enum Reply {
    Ready(Observation),
    Stepped {
        /// The bot's macro-action.
        step: Move,
        skipped_total: u64,
        /// What the rival played meanwhile (self-play; empty otherwise).
        rival: Vec<RivalMove>,
    },
    /// The step ran across a pause (`skipped` frames without a decision): its outcome
    /// is not the bot's, and the episode ends before it.
    Cut {
        skipped: u64,
        skipped_total: u64,
    },
    /// The emulator failed; the environment can be reset.
    Failed(String),
    /// The emulator could not be created; the environment is gone.
    Fatal(String),
}

/// Seed offset of a rival's random stream (its exploration).
const RIVAL_STREAM: u64 = 0x5e1f_91a7;

/// Run one environment: do what the actor says, answer with what happened.
pub fn env_thread<E: Emulator + Seats>(
    idx: usize,
    make: &dyn Fn(usize) -> anyhow::Result<E>,
    game: Game,
    cmds: mpsc::Receiver<Cmd>,
    replies: mpsc::Sender<(usize, Reply)>,
    live: Option<Arc<LiveTap>>,
) {
    let emu = match make(idx) {
        Ok(e) => e,
        Err(e) => {
            let _ = replies.send((idx, Reply::Fatal(format!("{e:#}"))));
            return;
        }
    };
    let mut env = Env::new(emu, game.setup, game.task, game.actions);
    let mut pacer = Pacer::default();
    // The loop ends when the actor drops its sender (shutdown).
    for cmd in cmds {
        let reply = match cmd {
            Cmd::Reset { cpu_level, seed, rival } => {
                let rival = rival.map(|p| p.rival(game.actions));
                match env.emulator_mut().seat_rival(rival, seed ^ RIVAL_STREAM, true) {
                    Ok(()) => env.reset(cpu_level, seed).map(Reply::Ready),
                    Err(e) => Ok(Reply::Failed(e)),
                }
            }
            Cmd::Step(a, decision) => {
                let skipped_before = env.emulator().skipped_frames();
                let mut paced = false;
                let stepped = match (&live, decision) {
                    (Some(tap), Some(d)) if tap.watched() => {
                        paced = true;
                        tap.set_decision(&d);
                        // Each frame waits for its turn at 60 fps, then goes to the browser.
                        env.step_with(a, |obs| {
                            pacer.frame();
                            tap.push(obs, &d);
                        })
                    }
                    _ => {
                        pacer.reset();
                        env.step(a)
                    }
                };
                let skipped_total = env.emulator().skipped_frames();
                let skipped = skipped_total - skipped_before;
                // A step paced to real time for the live view waits between frames on
                // purpose; a free-running emulator runs on meanwhile, which is the
                // watcher's doing, not a pause of the worker's.
                let cut = skipped >= CUT_AFTER_FRAMES && !paced;
                let rival = env.emulator_mut().take_moves();
                stepped.map(|step| if cut { Reply::Cut { skipped, skipped_total } } else { Reply::Stepped { step, skipped_total, rival } })
            }
        };
        let reply = reply.unwrap_or_else(|e| Reply::Failed(e.to_string()));
        if replies.send((idx, reply)).is_err() {
            return;
        }
    }
}
