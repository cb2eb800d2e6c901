//! An environment: an [`Emulator`] seen through the agent's eyes. One `step` plays one
//! macro-action frame by frame and returns the transition it produced.

use crate::actions::{ActionSet, NOTHING};
use crate::state::{Observation, StateReader};
use crate::task::{Episode, EpisodeEnd, Task};
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

/// What one macro-action produced.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub next: Observation,
    /// Reward summed over the macro's frames.
    pub reward: f32,
    pub end: Option<EpisodeEnd>,
    /// Frames the macro ran (fewer than its script when the episode ended inside it).
    pub frames: u32,
}

pub struct Env<E: Emulator> {
    emu: E,
    setup: MatchSetup,
    task: Task,
    actions: ActionSet,
    reader: StateReader,
    episode: Option<Episode>,
    obs: Option<Observation>,
}

impl<E: Emulator> Env<E> {
    pub fn new(emu: E, setup: MatchSetup, task: Task, actions: ActionSet) -> Self {
        Env { emu, setup, task, actions, reader: StateReader::new(), episode: None, obs: None }
    }

    pub fn emulator(&self) -> &E {
        &self.emu
    }
    pub fn emulator_mut(&mut self) -> &mut E {
        &mut self.emu
    }
    pub fn actions(&self) -> ActionSet {
        self.actions
    }
    pub fn setup(&self) -> MatchSetup {
        self.setup
    }
    /// The current observation (after `reset`).
    pub fn observation(&self) -> Option<&Observation> {
        self.obs.as_ref()
    }
    pub fn episode(&self) -> Option<&Episode> {
        self.episode.as_ref()
    }

    /// Start a new episode with the opponent at `cpu_level`.
    pub fn reset(&mut self, cpu_level: u8, seed: u64) -> Result<Observation, EnvError> {
        self.setup.cpu_level = cpu_level;
        self.emu.reset(self.setup, seed).map_err(|e| EnvError::Emulator(Box::new(e)))?;
        self.reader.reset();
        let obs = self.reader.read(self.emu.ram(), &self.setup)?;
        self.episode = Some(Episode::new(self.task, &obs));
        self.obs = Some(obs);
        Ok(obs)
    }

    /// Play macro-action `action` until its script ends or the episode does.
    pub fn step(&mut self, action: usize) -> Result<Step, EnvError> {
        self.step_with(action, |_| {})
    }

    /// [`Env::step`], calling `on_frame` with the observation after every emulated
    /// frame (the worker's live view draws each one).
    pub fn step_with(&mut self, action: usize, mut on_frame: impl FnMut(&Observation)) -> Result<Step, EnvError> {
        let script = self.actions.script(action).ok_or(EnvError::BadAction { action, set: self.actions, len: self.actions.len() })?;
        let episode = self.episode.as_mut().expect("Env::step before Env::reset");
        self.reader.set_shine_flag(self.actions.is_shine(action));
        let mut reward = 0.0;
        let mut frames = 0;
        let mut end = None;
        let mut obs = self.obs.expect("observation after reset");
        for pad in script {
            self.emu.step(pad).map_err(|e| EnvError::Emulator(Box::new(e)))?;
            obs = self.reader.read(self.emu.ram(), &self.setup)?;
            on_frame(&obs);
            let (r, e) = episode.frame(&obs, action == NOTHING);
            reward += r;
            frames += 1;
            if e.is_some() {
                end = e;
                break;
            }
        }
        self.obs = Some(obs);
        Ok(Step { next: obs, reward, end, frames })
    }
}
