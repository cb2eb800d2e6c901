//! A scripted game for the worker's tests: a real [`Emulator`] that writes Melee's RAM
//! layout like the simulator does, but whose outcome the test fixes in advance: the
//! agent stands in Wait and is hit at a frame chosen from the episode seed (or never,
//! and the episode runs into the time limit). That makes rewards and terminal flags
//! checkable by hand, which the real simulator's fights are not.
//!
//! [`harness`]: the actor on a thread with its channels, for the tests that run it.
#![allow(dead_code)]

pub mod harness;

use rand::SeedableRng;
use shine_agent::model::{random_weights, save, ModelMeta, QNet};
use shine_agent::{ActionSet, Task};
use shine_bridge::melee::action;
use shine_bridge::ram::{addr, fighter, static_block, static_player, RamImage, SIM_FIGHTER_DATA};
use shine_bridge::{Emulator, MatchSetup, Pad, RamView};
use shine_worker::pipeline::actor::ActorConfig;

pub use shine_testkit::HANG;

/// Poll `ok` until it holds; panics after [`HANG`].
pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + HANG;
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Frame at which the agent is hit, from the episode seed; `None`: never.
pub type Schedule = fn(u64) -> Option<u32>;

pub struct Scripted {
    img: RamImage,
    setup: MatchSetup,
    frame: u32,
    hit_at: Option<u32>,
    schedule: Schedule,
    /// At this frame of every episode the game runs [`PAUSE_FRAMES`] frames on its own
    /// (as Dolphin does while the worker waits), counted as skipped.
    pause_at: Option<u32>,
    skipped: u64,
}

/// How long a scripted pause lasts, in frames.
pub const PAUSE_FRAMES: u32 = 60;
/// State index of the opponent's x: it moves one unit a frame (mod 120), a clock.
pub const OPPONENT_X: usize = shine_agent::state::idx::X;

/// State index of the agent's percent (second player block).
pub const AGENT_PERCENT: usize = 13 + shine_agent::state::idx::PERCENT;

impl Scripted {
    pub fn new(setup: MatchSetup, schedule: Schedule) -> Self {
        let mut s = Scripted { img: RamImage::sim(), setup, frame: 0, hit_at: None, schedule, pause_at: None, skipped: 0 };
        s.write();
        s
    }

    /// The same game, with a pause at `frame` of every episode.
    pub fn pausing_at(setup: MatchSetup, schedule: Schedule, frame: u32) -> Self {
        Scripted { pause_at: Some(frame), ..Scripted::new(setup, schedule) }
    }

    fn write(&mut self) {
        let hit = self.hit_at.is_some_and(|h| self.frame >= h);
        let mut w = self.img.writer();
        for (port, data, is_agent) in [(self.setup.opponent_port, SIM_FIGHTER_DATA[0], false), (self.setup.agent_port, SIM_FIGHTER_DATA[1], true)] {
            let s = static_block(port);
            // The opponent paces back and forth so that states differ frame to frame.
            let x = if is_agent { 0.0 } else { -60.0 + (self.frame % 120) as f32 };
            w.set_f32(s + static_player::X, x).unwrap();
            w.set_f32(s + static_player::Y, 0.0).unwrap();
            w.set_u16(s + static_player::PERCENT, if is_agent && hit { 10 } else { 0 }).unwrap();
            w.set_u8(s + static_player::STOCKS, 4).unwrap();
            w.set_u32(s + static_player::FIGHTER_PTR, data).unwrap();
            let act = if is_agent && hit { action::DAMAGE_HIGH_1 } else { action::WAIT };
            w.set_u32(data + fighter::ACTION_STATE, act).unwrap();
            w.set_f32(data + fighter::FACING, 1.0).unwrap();
        }
        w.set_u32(addr::FRAME_COUNTER, self.frame).unwrap();
    }
}

/// No seat for a policy on the other side (self-play is the simulator's).
impl shine_worker::games::duel::Seats for Scripted {}

impl Emulator for Scripted {
    type Error = std::convert::Infallible;

    fn reset(&mut self, setup: MatchSetup, seed: u64) -> Result<(), Self::Error> {
        self.setup = setup;
        self.frame = 0;
        self.hit_at = (self.schedule)(seed);
        self.write();
        Ok(())
    }
    fn step(&mut self, _pad: &Pad) -> Result<(), Self::Error> {
        if self.pause_at == Some(self.frame) {
            self.frame += PAUSE_FRAMES;
            self.skipped += u64::from(PAUSE_FRAMES);
        }
        self.frame += 1;
        self.write();
        Ok(())
    }
    fn skipped_frames(&self) -> u64 {
        self.skipped
    }
    fn ram(&self) -> RamView<'_> {
        self.img.view()
    }
    fn setup(&self) -> MatchSetup {
        self.setup
    }
}

/// A model file with random weights for the Untouchable action set.
pub fn model_bytes(version: u64, weights_seed: u64) -> Vec<u8> {
    let mut meta = ModelMeta::new("untouchable", 5);
    meta.model_version = version;
    let w = random_weights(&meta, &mut rand_chacha::ChaCha8Rng::seed_from_u64(weights_seed));
    save(&meta, &w).unwrap()
}

pub fn model(version: u64) -> QNet {
    QNet::load(&model_bytes(version, 1)).unwrap()
}

/// An actor playing the Untouchable task with one-step returns and a fixed number of
/// environments; each test changes what it tests (`..actor_config(envs, seed)`).
pub fn actor_config(envs: usize, seed: u64) -> ActorConfig {
    ActorConfig {
        task: Task::Untouchable,
        actions: ActionSet::Untouchable,
        side: shine_agent::Side::Fox,
        setup: MatchSetup::default(),
        envs,
        n_step: 1,
        gamma: 0.99,
        cpu_level: 9,
        cpu_level_top_share: 0.7,
        eval_share: 0.0,
        batch_transitions: 1000,
        batch_secs: 0.5,
        batch_cap: 0,
        seed,
        auto: None,
        selfplay: None,
    }
}
