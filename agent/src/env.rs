//! An environment: an [`Emulator`] seen through the agent's eyes. One `step` plays one
//! macro-action frame by frame and returns the transition it produced: the bot's
//! [`Seat`], its decisions made by the caller (the worker's actor).

use crate::actions::ActionSet;
use crate::seat::{Caller, Move, Seat};
use crate::state::Observation;
use crate::task::{Episode, Task};
use shine_bridge::ram::RamError;
use shine_bridge::{Emulator, MatchSetup};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum EnvError {
    #[error("emulator: {0}")]
    Emulator(Box<dyn std::error::Error + Send + Sync>),
    #[error("reading the game state: {0}")]
    Ram(#[from] RamError),
    #[error("action {action} is not in the {set} action set (0..{len})")]
    BadAction { action: usize, set: ActionSet, len: usize },
}

pub struct Env<E: Emulator> {
    emu: E,
    setup: MatchSetup,
    /// The bot's side: its decisions are the caller's, its score the task's.
    seat: Seat<Caller>,
}

impl<E: Emulator> Env<E> {
    pub fn new(emu: E, setup: MatchSetup, task: Task, actions: ActionSet) -> Self {
        Env { emu, setup, seat: Seat::new(Caller, actions, setup, 0).scoring(task) }
    }

    pub fn emulator(&self) -> &E {
        &self.emu
    }
    pub fn emulator_mut(&mut self) -> &mut E {
        &mut self.emu
    }
    pub fn actions(&self) -> ActionSet {
        self.seat.actions()
    }
    pub fn setup(&self) -> MatchSetup {
        self.setup
    }
    /// The current observation (after `reset`).
    pub fn observation(&self) -> Option<&Observation> {
        self.seat.observation()
    }
    pub fn episode(&self) -> Option<&Episode> {
        self.seat.episode()
    }

    /// Start a new episode with the opponent at `cpu_level`.
    pub fn reset(&mut self, cpu_level: u8, seed: u64) -> Result<Observation, EnvError> {
        self.setup.cpu_level = cpu_level;
        self.emu.reset(self.setup, seed).map_err(|e| EnvError::Emulator(Box::new(e)))?;
        Ok(self.seat.restart(self.setup, self.emu.ram())?)
    }

    /// Play macro-action `action` until its script ends or the episode does.
    pub fn step(&mut self, action: usize) -> Result<Move, EnvError> {
        self.step_with(action, |_| {})
    }

    /// [`Env::step`], calling `on_frame` with the observation after every emulated
    /// frame (the worker's live view draws each one).
    pub fn step_with(&mut self, action: usize, mut on_frame: impl FnMut(&Observation)) -> Result<Move, EnvError> {
        let actions = self.seat.actions();
        assert!(action >= actions.len() || self.seat.episode().is_some(), "Env::step before Env::reset");
        self.seat.play(action).ok_or(EnvError::BadAction { action, set: actions, len: actions.len() })?;
        loop {
            let pad = self.seat.next_pad();
            self.emu.step(&pad).map_err(|e| EnvError::Emulator(Box::new(e)))?;
            let played = self.seat.observe(self.emu.ram())?;
            on_frame(self.seat.observation().expect("read just now"));
            if let Some(m) = played {
                return Ok(m);
            }
        }
    }
}
