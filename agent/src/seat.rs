//! A seat: one side of a match as a policy plays it, a pad a frame. The one model of a
//! match every player of a side uses: the worker's environment
//! ([`Env`](crate::env::Env), its actor deciding), the simulator's and Dolphin's second
//! policy (the worker's `games::duel`), a bot against a person in Dolphin
//! (`games::versus`) and in the browser (the manager's `play`).
//!
//! ```text
//! policy ─ macro-action ─► script in play ─ pad ─► the game's next frame
//!   ▲                                                 │ RAM
//!   └── Observation (its own side's 27 floats) ◄─ StateReader (the seat's view)
//! ```
//!
//! A seat decides when the macro-action in play has played out (the policy's choice,
//! [`Seat::pad`]), or when its caller says so ([`Seat::play`]: the worker's actor decides
//! for all its environments in one forward pass), and plays the macro's script one pad a
//! frame. It reads the match from its own side ([`crate::Side::view`]) after every
//! frame, as [`StateReader`] needs (the state's frame counters and shine flag). A seat
//! may keep score of a task for its side ([`Seat::scoring`]): the rewards and the
//! episode's end, summed per macro-action into a [`Move`], the transition a learner
//! takes; once its episode has ended it decides no more.

use crate::actions::{ActionSet, NOTHING};
use crate::policy::Policy;
use crate::state::{Observation, StateReader, STATE_DIM};
use crate::task::{Episode, EpisodeEnd, Task};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use shine_bridge::pad::Pad;
use shine_bridge::ram::{RamError, RamView};
use shine_bridge::MatchSetup;

/// One macro-action a seat played and what followed it: a transition of its side.
#[derive(Debug, Clone, Copy)]
pub struct Move {
    /// The state it was decided on.
    pub state: [f32; STATE_DIM],
    pub action: usize,
    /// Reward summed over the macro's frames, for the seat's side (0 when it keeps no
    /// score).
    pub reward: f32,
    /// The observation after its last frame.
    pub next: Observation,
    pub end: Option<EpisodeEnd>,
    /// Frames it ran (fewer than its script when the episode ended inside it).
    pub frames: u32,
}

/// The policy of a seat whose caller decides, through [`Seat::play`] (the worker's
/// actor, for all its environments in one batched forward pass).
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller;

/// The macro-action in play: what was decided, on which state, and what it has earned.
#[derive(Debug, Clone, Copy)]
struct Playing {
    action: usize,
    state: [f32; STATE_DIM],
    reward: f32,
    frames: u32,
}

/// One side of a match: a policy, its state reader and the macro-action script in play.
pub struct Seat<P> {
    policy: P,
    actions: ActionSet,
    /// The match from the seat's side.
    view: MatchSetup,
    reader: StateReader,
    rng: ChaCha8Rng,
    /// The task it keeps score of, if any.
    task: Option<Task>,
    obs: Option<Observation>,
    episode: Option<Episode>,
    script: &'static [Pad],
    /// The index of the script's next pad.
    next_frame: usize,
    playing: Option<Playing>,
    /// Its episode ended: it decides no more.
    over: bool,
}

impl<P> Seat<P> {
    /// `policy` choosing among `actions`' macro-actions on the side `view` describes
    /// (its own port as `agent_port`), its random stream seeded with `seed`; it keeps no
    /// score. Nothing is read before [`Seat::restart`].
    pub fn new(policy: P, actions: ActionSet, view: MatchSetup, seed: u64) -> Seat<P> {
        Seat {
            policy,
            actions,
            view,
            reader: StateReader::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            task: None,
            obs: None,
            episode: None,
            script: &[],
            next_frame: 0,
            playing: None,
            over: false,
        }
    }

    /// The same seat, keeping score of `task` for its side from the next restart on.
    pub fn scoring(mut self, task: Task) -> Seat<P> {
        self.task = Some(task);
        self
    }

    /// Its random stream seeded anew with `seed` (a policy's random moves).
    pub fn reseed(&mut self, seed: u64) {
        self.rng = ChaCha8Rng::seed_from_u64(seed);
    }

    /// A fresh match seen from `view`: nothing in play, its first frame read from `ram`
    /// (and its episode begun there, when it keeps score).
    pub fn restart(&mut self, view: MatchSetup, ram: RamView) -> Result<Observation, RamError> {
        self.view = view;
        self.reader.reset();
        (self.script, self.next_frame, self.playing, self.over) = (&[], 0, None, false);
        let obs = self.reader.read(ram, &self.view)?;
        self.obs = Some(obs);
        self.episode = self.task.map(|t| Episode::new(t, &obs));
        Ok(obs)
    }

    pub fn policy(&self) -> &P {
        &self.policy
    }
    pub fn actions(&self) -> ActionSet {
        self.actions
    }
    /// The state after the last frame read.
    pub fn observation(&self) -> Option<&Observation> {
        self.obs.as_ref()
    }
    /// The episode scored so far (with [`Seat::scoring`], after a restart).
    pub fn episode(&self) -> Option<&Episode> {
        self.episode.as_ref()
    }

    /// Whether the macro-action in play has played out: the next pad is a new decision's.
    pub fn due(&self) -> bool {
        self.next_frame >= self.script.len()
    }

    /// Play macro-action `action` from the next frame on, decided on the last state read
    /// (the caller's decision; a macro still in play is dropped). `None`: `action` is not
    /// in the seat's action set, and nothing changed.
    ///
    /// # Panics
    /// Before the first [`Seat::restart`]: there is no state to decide on.
    pub fn play(&mut self, action: usize) -> Option<()> {
        let script = self.actions.script(action)?;
        let state = self.obs.expect("Seat::play before Seat::restart").state;
        self.script = script;
        self.next_frame = 0;
        self.reader.set_shine_flag(self.actions.is_shine(action));
        self.playing = Some(Playing { action, state, reward: 0.0, frames: 0 });
        Some(())
    }

    /// The next pad of the macro in play (neutral once it has played out).
    pub fn next_pad(&mut self) -> Pad {
        let pad = self.script.get(self.next_frame).copied().unwrap_or(Pad::NEUTRAL);
        self.next_frame += 1;
        pad
    }

    /// Read the frame just played; account its reward (when keeping score); close the
    /// macro in play when it has played out or the episode ended: what it did, then.
    pub fn observe(&mut self, ram: RamView) -> Result<Option<Move>, RamError> {
        let obs = self.reader.read(ram, &self.view)?;
        self.obs = Some(obs);
        let chose_nothing = self.playing.is_some_and(|p| p.action == NOTHING);
        let (reward, end) = match self.episode.as_mut() {
            Some(episode) if !self.over => episode.frame(&obs, chose_nothing),
            _ => (0.0, None),
        };
        self.over |= end.is_some();
        let Some(p) = self.playing.as_mut() else { return Ok(None) };
        p.reward += reward;
        p.frames += 1;
        if end.is_none() && !self.due() {
            return Ok(None);
        }
        let Playing { action, state, reward, frames } = self.playing.take().expect("checked above");
        Ok(Some(Move { state, action, reward, next: obs, end, frames }))
    }
}

impl<P: Policy> Seat<P> {
    /// Ask the policy now, on the last state read, and play its choice: the action.
    ///
    /// # Panics
    /// Before the first [`Seat::restart`].
    pub fn decide(&mut self) -> usize {
        let obs = self.obs.expect("Seat::decide before Seat::restart");
        // A policy answers from its own action set; the clamp keeps a wrong one playing.
        let a = self.policy.act(&obs, &mut self.rng).min(self.actions.len() - 1);
        self.play(a).expect("clamped into the action set");
        a
    }

    /// The pad for the next frame: the macro in play's, or when it has played out the
    /// first of the policy's next decision (none once the seat's episode has ended, nor
    /// before anything was read: a neutral pad then).
    pub fn pad(&mut self) -> Pad {
        if self.due() && !self.over && self.obs.is_some() {
            self.decide();
        }
        self.next_pad()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RandomPolicy;
    use shine_bridge::sim::Sim;
    use shine_bridge::Emulator;

    #[test]
    fn a_seat_decides_when_its_macro_has_played_out_and_sums_it_into_a_move() {
        let setup = MatchSetup::default();
        let mut sim = Sim::new(setup, 3);
        sim.reset(setup, 3).unwrap();
        // The untouchable set's macros differ in length; the fight task ends only after a
        // minute or a game over, so no end comes inside these twenty.
        let mut seat = Seat::new(RandomPolicy(ActionSet::Untouchable), ActionSet::Untouchable, setup, 5).scoring(Task::Fight);
        let first = seat.restart(setup, sim.ram()).unwrap();
        let mut moves = vec![];
        let mut frames = 0;
        while moves.len() < 20 {
            let deciding = seat.due();
            let pad = seat.pad();
            if deciding {
                assert_eq!(pad, ActionSet::Untouchable.script(seat.playing.unwrap().action).unwrap()[0], "a decision plays its macro's first pad");
            }
            sim.step(&pad).unwrap();
            frames += 1;
            if let Some(m) = seat.observe(sim.ram()).unwrap() {
                assert_eq!(m.end, None);
                assert_eq!(m.frames as usize, ActionSet::Untouchable.script(m.action).unwrap().len(), "a move is its whole macro");
                moves.push(m);
            }
        }
        assert_eq!(moves[0].state, first.state, "the first move was decided on the first frame read");
        for w in moves.windows(2) {
            assert_eq!(w[0].next.state, w[1].state, "each move is decided on the state the last one left");
        }
        assert_eq!(moves.iter().map(|m| m.frames).sum::<u32>(), frames, "every frame is in a move");
        assert!(moves.iter().any(|m| m.action != moves[0].action), "a random policy's choices differ");
        // The caller decides: out of the set, nothing changes.
        assert_eq!(seat.play(ActionSet::Untouchable.len()), None);
    }
}
