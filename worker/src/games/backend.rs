//! Where the game runs, for `play` and `run` alike: the embedded simulator, or Dolphin
//! with the user's own Melee image (docs/dolphin.md).

use anyhow::{bail, Context};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use shine_bridge::dolphin::menu::Opponent;
use shine_bridge::dolphin::{self, Display, Dolphin, DolphinConfig, Game, HumanPad, Interrupt, Speed};
use shine_bridge::melee::characters::Character;
use shine_bridge::MatchSetup;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The embedded Melee-like simulator (no game image needed).
    Sim,
    /// Dolphin with your own Melee NTSC 1.02 image (--iso); see docs/dolphin.md.
    Dolphin,
}

impl Backend {
    /// The name the manager's worker list shows.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Dolphin => "dolphin",
        }
    }
}

/// A Dolphin setup that was checked before any game starts: the emulator exists and
/// so does the image. Each environment launches its own Dolphin from it.
#[derive(Debug, Clone)]
pub struct DolphinSetup {
    iso: PathBuf,
    executable: Option<PathBuf>,
    /// What stops each Dolphin launched from here (Ctrl-C in `play`).
    interrupt: Interrupt,
}

impl DolphinSetup {
    /// Check `--iso` and `--dolphin`, saying what is missing; warns (once, here) about an
    /// image that is not Melee NTSC.
    pub fn check(iso: Option<&Path>, executable: Option<&Path>) -> anyhow::Result<DolphinSetup> {
        let Some(iso) = iso else {
            bail!("--backend dolphin needs your own Melee NTSC 1.02 image: pass --iso PATH (Shine cannot ship the game). `shine-worker doctor --iso PATH` checks the whole setup");
        };
        // Fail on the missing emulator before anything else: it is the likelier gap.
        dolphin::process::find_executable(executable)?;
        if !iso.is_file() {
            bail!("the image {} does not exist: pass your own Melee NTSC 1.02 image with --iso PATH", iso.display());
        }
        if let Ok(Some(id)) = dolphin::image_game_id(iso) {
            if id != dolphin::MELEE_GAME_ID {
                tracing::warn!("{} has game id {id}, not {} (Melee NTSC); Shine's RAM map fits only NTSC 1.02", iso.display(), dolphin::MELEE_GAME_ID);
            }
        }
        Ok(DolphinSetup { iso: iso.to_path_buf(), executable: executable.map(Path::to_path_buf), interrupt: Interrupt::default() })
    }

    /// The same setup, its Dolphins stopped by `interrupt` (launch, menus and play end
    /// with `DolphinError::Interrupted` once it says so).
    pub fn with_interrupt(mut self, interrupt: Interrupt) -> DolphinSetup {
        self.interrupt = interrupt;
        self
    }

    /// Whether the interrupt says stop now (Ctrl-C).
    pub fn interrupted(&self) -> bool {
        self.interrupt.now()
    }

    /// Start one Dolphin (its own user folder, pipe and RAM) for a match like `setup`.
    pub fn launch(&self, setup: MatchSetup) -> anyhow::Result<Dolphin> {
        self.start(setup, |_| {})
    }

    /// Start one Dolphin for matches against an opponent bot: a second pipe on
    /// `setup.opponent_port`, its port a human one with Marth (`crate::games::duel::DolphinDuel`
    /// plays it).
    pub fn launch_against_bot(&self, setup: MatchSetup) -> anyhow::Result<Dolphin> {
        self.start(setup, |cfg| set_opponent(cfg, Opponent::Bot))
    }

    /// Start one Dolphin for matches against a person on `setup.opponent_port` with
    /// `pad`, in a window at real-time speed (the bot's port is still a pipe, its coin
    /// on `bot`).
    pub fn launch_against_person(&self, setup: MatchSetup, pad: HumanPad, bot: Character) -> anyhow::Result<Dolphin> {
        self.start(setup, |cfg| {
            cfg.speed = Speed::RealTime;
            cfg.display = Display::Window;
            cfg.human_pad = Some(pad);
            set_opponent(cfg, Opponent::Human);
            if let Game::Melee(goal) = &mut cfg.game {
                goal.agent_character = bot;
            }
        })
    }

    /// Start one Dolphin with Melee's config for `setup`, changed by `edit`.
    fn start(&self, setup: MatchSetup, edit: impl FnOnce(&mut DolphinConfig)) -> anyhow::Result<Dolphin> {
        let mut cfg = DolphinConfig::melee(&self.iso, setup);
        cfg.executable = self.executable.clone();
        cfg.interrupt = self.interrupt.clone();
        edit(&mut cfg);
        Dolphin::launch(cfg).context("starting Dolphin (run `shine-worker doctor` to check the setup)")
    }
}

/// Who the menus set up on the opponent's port (a Melee config's goal).
fn set_opponent(cfg: &mut DolphinConfig, opponent: Opponent) {
    if let Game::Melee(goal) = &mut cfg.game {
        goal.opponent = opponent;
    }
}
