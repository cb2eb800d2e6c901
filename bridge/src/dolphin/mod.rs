//! The Dolphin backend: real Melee in a real emulator, behind the same [`Emulator`]
//! trait as the embedded simulator.
//!
//! Layout and data flow:
//! - [`userdir`]: the per-instance user folder (config, controller mapping, one FIFO
//!   per driven port, the boot-to-CSS Gecko code, the optional MemoryWatcher watch
//!   list).
//! - [`process`]: finding `dolphin-emu-nogui`, launching it headless with its log
//!   captured, noticing that it died.
//! - [`guest`]: finding Dolphin's guest-RAM segment through `/proc/PID/fd`.
//! - [`sys`]: the only `unsafe` (the mmap and `mkfifo`), with its `# Safety` note.
//! - [`pipe`]: a pad, one `write()` per frame and port.
//! - [`css`]: the menus' RAM layout and screen geometry, with their sources.
//! - [`menu`]: from wherever Melee is to a fresh match (pure decisions on RAM).
//! - [`dol`], [`probe`]: the DOL format and the homebrew probe that proves the
//!   whole path against real Dolphin without a game image.
//!
//! ```text
//!  Pads ─► FIFOs (Pipes/botN) ─► Dolphin ─► guest RAM (/dev/shm/dolphin-emu.PID, mmap) ─► RamView
//!                                  └──── frame tick: frame counter moved (or a MemoryWatcher datagram)
//! ```
//!
//! Two ports are driven, each through its own pipe: the bot's, and the CPU's, whose own
//! hand sets it up on the character-select screen (as the references do); during play
//! the CPU's pipe gets a neutral pad and `FLUSH` every frame too, so a Dolphin that
//! blocks on every pipe is never left waiting on it. Against a person ([`menu::Opponent::Human`]) only the bot's port is a
//! pipe: the person's port is mapped to their own controller ([`userdir::HumanPad`]).
//! Against an opponent bot ([`menu::Opponent::Bot`], a model playing the other side)
//! its port's pipe carries its pads ([`Dolphin::step_both`]).
//!
//! Timing: upstream Dolphin does not wait for input. [`Dolphin::step`] writes the pads,
//! then waits for the frame counter to move; if it moved by more than one, the frames
//! in between ran with the previous pad and are counted in
//! [`Emulator::skipped_frames`] (the paper's agent suffered from exactly this; here it
//! is visible). Every pad ends with `FLUSH`, which upstream ignores. Nothing here
//! relies on a Dolphin that waits for it: a Slippi build waits for a `FLUSH` only with
//! `BlockingPipes` on, and then only on frames where the game talks to Slippi's EXI
//! device (menu frames with the "Extract Menu Info" code, recorded match frames), which
//! Shine's user folder enables neither of (`docs/dolphin.md`, "Slippi builds and
//! FLUSH"); the test peer's `lockstep` pace is the one Dolphin-like program that waits
//! on every frame. Melee's frame counter stands still while the game loads a scene (a
//! stage takes seconds at real time), so the menus wait up to
//! [`DolphinConfig::load_timeout`] for a frame, and play up to
//! [`DolphinConfig::frame_timeout`].

pub mod css;
pub mod dol;
pub mod guest;
pub mod menu;
pub mod pipe;
pub mod probe;
pub mod process;
pub mod sys;
pub mod userdir;

use crate::emulator::{Emulator, MatchSetup};
use crate::pad::Pad;
use crate::ram::{addr, RamError, RamView};
use menu::{MenuError, MenuGoal, MenuStep, Navigator, Task};
use pipe::{PadPipe, PipeError};
use process::DolphinProcess;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use sys::MappedRam;
use thiserror::Error;
pub use userdir::{Display, HumanPad, Speed};

/// Everything that can go wrong, each with what to do about it.
#[derive(Debug, Error)]
pub enum DolphinError {
    #[error("Dolphin is not installed (looked for {}): {hint}", searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "), hint = process::INSTALL_HINT)]
    NotInstalled { searched: Vec<PathBuf> },
    #[error("the game image {0} does not exist: pass your own Melee NTSC 1.02 image (an .iso) with --iso PATH")]
    ImageMissing(PathBuf),
    #[error("could not start {exe}: {source}")]
    Spawn { exe: PathBuf, source: std::io::Error },
    #[error("Dolphin exited during start-up ({status}); its log ({log_path}) ends with:\n{log}")]
    ExitedEarly { status: String, log_path: PathBuf, log: String },
    #[error("Dolphin exited ({status}); its log ({log_path}) ends with:\n{log}")]
    Died { status: String, log_path: PathBuf, log: String },
    #[error("Dolphin (pid {pid}) did not expose its guest RAM (/dev/shm/dolphin-emu.{pid}) within {waited:?}; is the image bootable? Dolphin's log ({log_path}) ends with:\n{log}")]
    RamNotFound { pid: u32, waited: Duration, log_path: PathBuf, log: String },
    #[error("permission denied opening Dolphin's guest RAM at {path}: run the worker as the same user as Dolphin (and check that /proc is not mounted with hidepid): {source}")]
    PermissionDenied { path: PathBuf, source: std::io::Error },
    #[error("mapping Dolphin's guest RAM at {path}: {source}")]
    MapRam { path: PathBuf, source: std::io::Error },
    #[error("the game's frame counter ({counter:#010x}) did not move within {waited:?}: the emulator is stuck, or the image is not Melee NTSC 1.02 (or the probe). Dolphin's log ends with:\n{log}")]
    NoFrames { counter: u32, waited: Duration, log: String },
    #[error("controller pipe: {0}")]
    Pipe(#[from] PipeError),
    #[error("MemoryWatcher socket {path}: {source}")]
    Watcher { path: PathBuf, source: std::io::Error },
    #[error("{what} {path}: {source}")]
    UserDir { path: PathBuf, what: &'static str, source: std::io::Error },
    #[error("the path {path} is {len} bytes; Unix socket paths must be {max} or shorter: choose a shorter --user-dir")]
    PathTooLong { path: PathBuf, len: usize, max: usize },
    #[error("menu navigation did not reach a match within {frames} frames (last step: {last}); Melee must be NTSC 1.02 with the boot-to-character-select code (the user folder enables it)")]
    MenuStuck { frames: u64, last: String },
    #[error("{0}")]
    Menu(#[from] MenuError),
    #[error("reading Melee's RAM: {0}")]
    Ram(#[from] RamError),
    #[error("invalid Dolphin configuration: {0}")]
    Config(String),
    /// [`DolphinConfig::interrupt`] said stop (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
}

/// What runs in Dolphin, which decides what `reset` does.
#[derive(Debug, Clone, PartialEq)]
pub enum Game {
    /// Melee NTSC 1.02: `reset` navigates the menus into a fresh match.
    Melee(MenuGoal),
    /// A homebrew program (the probe): `reset` only waits for the next frame.
    Homebrew,
}

/// How the backend learns that a frame ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TickSource {
    /// Poll Melee's global frame counter in mapped RAM.
    #[default]
    FrameCounter,
    /// Dolphin's MemoryWatcher datagram (watching the frame counter), once per frame.
    MemoryWatcher,
}

/// How to run one Dolphin instance.
#[derive(Debug, Clone)]
pub struct DolphinConfig {
    /// `dolphin-emu-nogui` to run; `None`: search `PATH` and /usr/games.
    pub executable: Option<PathBuf>,
    /// The game image (Melee .iso) or a homebrew .dol.
    pub image: PathBuf,
    /// The user folder; `None`: a short one under the temp dir.
    pub user_dir: Option<PathBuf>,
    pub setup: MatchSetup,
    pub game: Game,
    pub speed: Speed,
    pub display: Display,
    pub tick: TickSource,
    /// Boot: Dolphin up, RAM mapped, the pipes open, the frame counter moving.
    pub boot_timeout: Duration,
    /// Longest wait for one frame of play (or for the pipe to drain).
    pub frame_timeout: Duration,
    /// Longest wait for one frame in the menus, which includes Melee's loads (the frame
    /// counter stands still while a scene loads).
    pub load_timeout: Duration,
    /// The person's controller when the opponent is a person
    /// ([`menu::Opponent::Human`]); their port is [`MatchSetup::opponent_port`].
    pub human_pad: Option<HumanPad>,
    /// Most frames `reset` may spend in menus.
    pub menu_frame_limit: u64,
    /// Extra command-line arguments (e.g. `-C Dolphin.Core.X=Y`).
    pub extra_args: Vec<String>,
    /// Launch waits for Melee's frame counter to move. Off for a program that does not
    /// keep one (`doctor --exec`): launch then only proves Dolphin runs and RAM maps.
    pub require_ticks: bool,
    /// Asked while Dolphin boots and before every frame: once it says stop, launch,
    /// the menus and play end with [`DolphinError::Interrupted`] (Ctrl-C; a walk that
    /// waits for a person waits as long as they take, so it must hear of it between
    /// two frames).
    pub interrupt: Interrupt,
}

/// A check that says whether to stop now (Ctrl-C), asked between frames; never, by
/// default.
#[derive(Clone, Default)]
pub struct Interrupt(Option<std::sync::Arc<dyn Fn() -> bool + Send + Sync>>);

impl Interrupt {
    pub fn new(stop: impl Fn() -> bool + Send + Sync + 'static) -> Interrupt {
        Interrupt(Some(std::sync::Arc::new(stop)))
    }
    /// Whether to stop now.
    pub fn now(&self) -> bool {
        self.0.as_ref().is_some_and(|stop| stop())
    }
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Interrupt(set)" } else { "Interrupt(never)" })
    }
}

impl DolphinConfig {
    /// Melee with the paper's setup: Fox (bot) vs. Marth (CPU) on Final Destination.
    pub fn melee(image: impl Into<PathBuf>, setup: MatchSetup) -> Self {
        let goal = MenuGoal { agent_port: setup.agent_port, opponent_port: setup.opponent_port, cpu_level: setup.cpu_level, ..MenuGoal::default() };
        DolphinConfig {
            executable: None,
            image: image.into(),
            user_dir: None,
            setup,
            game: Game::Melee(goal),
            speed: Speed::Unlimited,
            display: Display::Headless,
            tick: TickSource::FrameCounter,
            boot_timeout: Duration::from_secs(60),
            frame_timeout: Duration::from_secs(5),
            load_timeout: Duration::from_secs(60),
            human_pad: None,
            menu_frame_limit: 60 * 180,
            extra_args: vec![],
            require_ticks: true,
            interrupt: Interrupt::default(),
        }
    }
    /// A homebrew DOL (the probe).
    pub fn homebrew(dol: impl Into<PathBuf>) -> Self {
        DolphinConfig { game: Game::Homebrew, ..DolphinConfig::melee(dol, MatchSetup::default()) }
    }
}

/// The game id of a disc image (its first six bytes, e.g. "GALE01" for Melee NTSC),
/// `None` when the file is not a plain GameCube disc image.
pub fn image_game_id(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut id = [0u8; 6];
    let mut f = std::fs::File::open(path)?;
    if f.read(&mut id)? < 6 || !id.iter().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()) {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&id).into_owned()))
}

/// Melee NTSC (the only version Shine's RAM map fits; revision 2 = 1.02).
pub const MELEE_GAME_ID: &str = "GALE01";

/// Counts of what the frame tick saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickStats {
    /// Frames we waited for (one per pad sent).
    pub ticks: u64,
    /// Frames of play that ran without a fresh pad from us. Frames skipped in the
    /// menus are not counted: the game runs them free while it boots, and no bot
    /// decision is lost there.
    pub skipped: u64,
    /// Times Dolphin was (re)started.
    pub launches: u64,
}

struct Running {
    // Field order is drop order: the pipes and the map go before the process is killed.
    /// One per driven port, the bot's first (see [`driven_ports`]).
    pipes: Vec<PadPipe>,
    ram: MappedRam,
    watcher: Option<UnixDatagram>,
    proc: DolphinProcess,
}

/// One Dolphin instance playing for one worker environment.
pub struct Dolphin {
    cfg: DolphinConfig,
    exe: PathBuf,
    dir: userdir::UserDir,
    run: Running,
    setup: MatchSetup,
    last_frame: u32,
    stats: TickStats,
    /// We have stepped in the match on screen (so `reset` must quit it).
    played: bool,
    watch_buf: Vec<u8>,
    /// The user folder was made up by us (not given): removed on drop.
    owned_dir: bool,
}

impl Drop for Dolphin {
    fn drop(&mut self) {
        self.run.proc.kill();
        if self.owned_dir {
            let _ = std::fs::remove_dir_all(&self.dir.root);
        }
    }
}

impl Dolphin {
    /// Start Dolphin and wait until it runs: RAM mapped, frames ticking, pipes open.
    pub fn launch(cfg: DolphinConfig) -> Result<Dolphin, DolphinError> {
        if let Game::Melee(goal) = &cfg.game {
            if goal.opponent == menu::Opponent::Human && cfg.human_pad.is_none() {
                return Err(DolphinError::Config("a person as the opponent needs their controller (human_pad)".into()));
            }
        }
        if cfg.setup.agent_port == cfg.setup.opponent_port {
            return Err(DolphinError::Config(format!("the bot and its opponent are both on port {}", cfg.setup.agent_port + 1)));
        }
        let exe = process::find_executable(cfg.executable.as_deref())?;
        if !cfg.image.is_file() {
            return Err(DolphinError::ImageMissing(cfg.image.clone()));
        }
        let root = match &cfg.user_dir {
            Some(d) => d.clone(),
            None => {
                static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                userdir::default_root(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
            }
        };
        let spec = userdir_spec(&cfg);
        let dir = userdir::UserDir::create(&root, &spec)?;
        let (run, first_frame) = match start(&exe, &dir, &cfg) {
            Ok(started) => started,
            Err(e) => {
                // A folder of our own goes with an interrupted start; after a failed one
                // it stays, since the error quotes Dolphin's log in it.
                if matches!(e, DolphinError::Interrupted) && cfg.user_dir.is_none() {
                    let _ = std::fs::remove_dir_all(&dir.root);
                }
                return Err(e);
            }
        };
        let setup = cfg.setup;
        let owned_dir = cfg.user_dir.is_none();
        Ok(Dolphin {
            cfg,
            exe,
            dir,
            run,
            setup,
            last_frame: first_frame,
            stats: TickStats { launches: 1, ..TickStats::default() },
            played: false,
            watch_buf: vec![0; 4096],
            owned_dir,
        })
    }

    /// Kill Dolphin and start it again (after a crash, or on request).
    pub fn restart(&mut self) -> Result<(), DolphinError> {
        self.run.proc.kill();
        self.dir = userdir::UserDir::create(&self.dir.root, &userdir_spec(&self.cfg))?;
        (self.run, self.last_frame) = start(&self.exe, &self.dir, &self.cfg)?;
        self.stats.launches += 1;
        self.played = false;
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.run.proc.pid()
    }
    pub fn user_dir(&self) -> &Path {
        &self.dir.root
    }
    pub fn log_path(&self) -> &Path {
        self.run.proc.log_path()
    }
    pub fn stats(&self) -> TickStats {
        self.stats
    }
    /// The frame counter at the last tick.
    pub fn frame(&self) -> u32 {
        self.last_frame
    }
    /// Whether Dolphin has ended the way a person ends it: exited with status 0 (Esc or
    /// its window closed, or Ctrl-C, which Dolphin handles by shutting down), or killed
    /// by SIGINT or SIGTERM. `false` while it runs or after a crash.
    pub fn closed_by_user(&mut self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.run.proc.exited().is_some_and(|s| s.success() || matches!(s.signal(), Some(libc::SIGINT | libc::SIGTERM)))
    }

    /// `Err(Died)` when Dolphin is no longer running.
    pub fn check_alive(&mut self) -> Result<(), DolphinError> {
        match self.run.proc.exited() {
            None => Ok(()),
            Some(status) => {
                Err(DolphinError::Died { status: status.to_string(), log_path: self.run.proc.log_path().to_path_buf(), log: self.run.proc.log_tail(20) })
            }
        }
    }

    /// The newest frame number the tick source has shown (the last tick's when a
    /// MemoryWatcher has sent nothing new). `wait`: give a MemoryWatcher its socket's
    /// short timeout to send something; without it, only what has already arrived.
    fn poll_frame(&mut self, wait: bool) -> Result<u32, DolphinError> {
        match &self.run.watcher {
            None => frame_counter(&self.run.ram),
            Some(sock) => match recv_latest(sock, &mut self.watch_buf, wait) {
                Ok(v) => Ok(v.unwrap_or(self.last_frame)),
                Err(source) => Err(DolphinError::Watcher { path: self.dir.watcher_socket.clone().unwrap_or_default(), source }),
            },
        }
    }

    /// Wait (at most `timeout`) for the frame after the last one seen; returns how many
    /// frames ran on the old pad before it (0 for a Dolphin that waited for the pad).
    fn tick(&mut self, timeout: Duration) -> Result<u64, DolphinError> {
        let before = self.last_frame;
        let start = Instant::now();
        let mut spins = 0u32;
        let now = loop {
            let now = self.poll_frame(true)?;
            if now != before {
                break now;
            }
            if start.elapsed() > timeout {
                self.check_alive()?;
                return Err(DolphinError::NoFrames { counter: addr::FRAME_COUNTER, waited: timeout, log: self.run.proc.log_tail(20) });
            }
            if self.cfg.interrupt.now() {
                return Err(DolphinError::Interrupted);
            }
            // A Dolphin that exited (closed by the person, or crashed) is said now, not
            // after the timeout (a minute in the menus); a look every 500 turns of the
            // loop costs one waitpid a few milliseconds apart.
            if spins % 500 == 499 {
                self.check_alive()?;
            }
            // Spin briefly (an unlimited-speed frame takes well under a millisecond),
            // then back off so a real-time Dolphin does not cost a whole core.
            spins += 1;
            if spins < 2000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        self.stats.ticks += 1;
        self.last_frame = now;
        Ok(frames_from(before, now).saturating_sub(1))
    }

    /// Hold `pads` (one per driven port, the bot's first) for the next frame: one write
    /// per pipe, then wait (at most `tick_timeout`) for the frame to end. Returns the
    /// frames that ran on the previous pads since the last tick.
    fn step_pads(&mut self, pads: &[Pad], tick_timeout: Duration) -> Result<u64, DolphinError> {
        if self.cfg.interrupt.now() {
            return Err(DolphinError::Interrupted);
        }
        self.check_alive()?;
        // Which frame is on now, read right before the write: a frame that ran since
        // the last tick must not be taken for the one our pad makes (free-running
        // Dolphin; a blocking-pipe Dolphin running its boot before we connected).
        // (Without waiting: from a Dolphin that waits for the pad nothing new has come,
        // and a wait here would cost every frame the socket's timeout.)
        let before = self.poll_frame(false)?;
        let ran_meanwhile = frames_from(self.last_frame, before);
        self.last_frame = before;
        let timeout = self.cfg.frame_timeout;
        for (pipe, pad) in self.run.pipes.iter_mut().zip(pads.iter().chain(std::iter::repeat(&Pad::NEUTRAL))) {
            pipe.send(pad, true, timeout)?;
        }
        Ok(ran_meanwhile + self.tick(tick_timeout)?)
    }

    /// Run the menus until a fresh match is on (Melee only). `trace` hears of every
    /// new step, with what RAM said when it began, and of the match reached (`doctor`
    /// prints them). Returns the frames spent.
    pub fn navigate(&mut self, goal: MenuGoal, trace: &mut dyn FnMut(MenuTrace<'_>)) -> Result<u64, DolphinError> {
        let mut nav = Navigator::new(goal, self.played);
        let mut last = None;
        // Frames spent waiting for a person do not count against the limit: they set
        // the pace (menu::Task::waits_for_person).
        let mut counted = 0;
        let mut frame = 0;
        while counted < self.cfg.menu_frame_limit {
            let step = nav.next(self.ram())?;
            if !matches!(step, MenuStep::Press(_, task) if task.waits_for_person()) {
                counted += 1;
            }
            match step {
                MenuStep::Done => {
                    self.played = false;
                    trace(MenuTrace { task: None, frame, ram: self.ram(), goal: &goal });
                    return Ok(frame);
                }
                MenuStep::Press(pads, task) => {
                    if last != Some(task) {
                        trace(MenuTrace { task: Some(task), frame, ram: self.ram(), goal: &goal });
                        last = Some(task);
                    }
                    // A press in the menus may start a load: wait as long as one takes.
                    self.step_pads(&[pads.agent, pads.cpu], self.cfg.load_timeout)?;
                }
            }
            frame += 1;
        }
        Err(DolphinError::MenuStuck { frames: self.cfg.menu_frame_limit, last: last.map_or("none".into(), |t| t.to_string()) })
    }

    /// [`Emulator::reset`], with `trace` told of every menu step as it begins (what a
    /// person against the bot is waiting on is said so: `play --human-port`).
    pub fn reset_traced(&mut self, setup: MatchSetup, trace: &mut dyn FnMut(MenuTrace<'_>)) -> Result<(), DolphinError> {
        if self.check_alive().is_err() {
            self.restart()?;
        }
        self.setup = setup;
        match self.cfg.game.clone() {
            Game::Melee(goal) => {
                let goal = MenuGoal { agent_port: setup.agent_port, opponent_port: setup.opponent_port, cpu_level: setup.cpu_level, ..goal };
                self.navigate(goal, trace).map(drop)
            }
            Game::Homebrew => self.step_pads(&[Pad::NEUTRAL], self.cfg.frame_timeout).map(drop),
        }
    }
}

/// One moment of a menu walk: a step that began (`task`), or the match reached
/// (`None`), with RAM as it was then.
pub struct MenuTrace<'a> {
    pub task: Option<Task>,
    /// Frames since the walk began.
    pub frame: u64,
    pub ram: RamView<'a>,
    pub goal: &'a MenuGoal,
}

impl MenuTrace<'_> {
    /// What RAM said, in words ([`menu::describe_ram`]).
    pub fn said(&self) -> String {
        menu::describe_ram(self.ram, self.goal)
    }
}

/// The ports Shine drives through pipes: the bot's, and for Melee against a CPU the
/// CPU's (its hand sets it up on the menus), against an opponent bot that bot's.
fn driven_ports(cfg: &DolphinConfig) -> Vec<usize> {
    match cfg.game {
        Game::Melee(goal) if matches!(goal.opponent, menu::Opponent::Cpu | menu::Opponent::Bot) => vec![cfg.setup.agent_port, cfg.setup.opponent_port],
        Game::Melee(_) | Game::Homebrew => vec![cfg.setup.agent_port],
    }
}

fn userdir_spec(cfg: &DolphinConfig) -> userdir::UserDirSpec {
    userdir::UserDirSpec {
        pipe_ports: driven_ports(cfg),
        speed: cfg.speed,
        display: cfg.display,
        memory_watcher: (cfg.tick == TickSource::MemoryWatcher).then(|| vec![format!("{:08X}", addr::FRAME_COUNTER)]),
        boot_to_css: matches!(cfg.game, Game::Melee(_)),
        human: match cfg.game {
            Game::Melee(goal) if goal.opponent == menu::Opponent::Human => cfg.human_pad.clone().map(|pad| (cfg.setup.opponent_port, pad)),
            _ => None,
        },
    }
}

/// Launch Dolphin, then find and map its RAM, see frames tick (when required) and open
/// the pipe, each with the boot timeout and each failing early if Dolphin exits.
/// Returns the frame counter as last seen.
fn start(exe: &Path, dir: &userdir::UserDir, cfg: &DolphinConfig) -> Result<(Running, u32), DolphinError> {
    // The MemoryWatcher client binds the socket; Dolphin only sends to it.
    let watcher = match &dir.watcher_socket {
        None => None,
        Some(path) => {
            let _ = std::fs::remove_file(path);
            let sock = UnixDatagram::bind(path).map_err(|source| DolphinError::Watcher { path: path.clone(), source })?;
            sock.set_read_timeout(Some(Duration::from_millis(1))).map_err(|source| DolphinError::Watcher { path: path.clone(), source })?;
            Some(sock)
        }
    };
    let mut proc = DolphinProcess::spawn(exe, &dir.root, &cfg.image, &dir.log, cfg.display, &cfg.extra_args)?;
    let started = Instant::now();
    let early = |proc: &mut DolphinProcess| -> Result<(), DolphinError> {
        if cfg.interrupt.now() {
            return Err(DolphinError::Interrupted);
        }
        match proc.exited() {
            None => Ok(()),
            Some(status) => Err(DolphinError::ExitedEarly { status: status.to_string(), log_path: proc.log_path().to_path_buf(), log: proc.log_tail(20) }),
        }
    };
    let fd_dir = PathBuf::from(format!("/proc/{}/fd", proc.pid()));
    let ram = loop {
        early(&mut proc)?;
        if let Ok(Some(seg)) = guest::scan_fd_dir(&fd_dir) {
            if let Some(ram) = guest::map_mem1(&seg)? {
                break ram;
            }
        }
        if started.elapsed() > cfg.boot_timeout {
            return Err(DolphinError::RamNotFound {
                pid: proc.pid(),
                waited: cfg.boot_timeout,
                log_path: proc.log_path().to_path_buf(),
                log: proc.log_tail(20),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Frames first, then the pipe: a Dolphin that waits for its pipes (the test peer's
    // lockstep pace; a Slippi build with blocking pipes on the frames it blocks) runs
    // free only until a writer connects, so the game must be seen running before we
    // connect.
    let first_frame = if cfg.require_ticks {
        let waiting = Instant::now();
        let first = frame_counter(&ram)?;
        loop {
            early(&mut proc)?;
            let now = frame_counter(&ram)?;
            if now != first {
                break now;
            }
            if waiting.elapsed() > cfg.boot_timeout {
                return Err(DolphinError::NoFrames { counter: addr::FRAME_COUNTER, waited: cfg.boot_timeout, log: proc.log_tail(20) });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    } else {
        frame_counter(&ram)?
    };
    let mut pipes = vec![];
    for path in &dir.pipes {
        let left = cfg.boot_timeout.saturating_sub(started.elapsed()).max(Duration::from_secs(1));
        let pipe =
            PadPipe::open(path, left, || early(&mut proc).map_err(|e| PipeError::Io { path: path.clone(), source: std::io::Error::other(e.to_string()) }));
        pipes.push(pipe.map_err(|e| if cfg.interrupt.now() { DolphinError::Interrupted } else { e.into() })?);
    }
    Ok((Running { pipes, ram, watcher, proc }, first_frame))
}

/// Melee's frame counter in mapped guest RAM.
fn frame_counter(ram: &MappedRam) -> Result<u32, DolphinError> {
    let off = (addr::FRAME_COUNTER - addr::MEM1_BASE) as usize;
    let len = ram.bytes().len();
    ram.load_u32_be(off).ok_or(DolphinError::Ram(RamError::OutOfRange {
        addr: addr::FRAME_COUNTER,
        len: 4,
        start: addr::MEM1_BASE,
        end: addr::MEM1_BASE as u64 + len as u64,
    }))
}

/// Frames from counter value `from` to `to`: 0 for a counter that went back (a new
/// game resets it), which is not skipping.
fn frames_from(from: u32, to: u32) -> u64 {
    let d = to.wrapping_sub(from);
    if d < 1 << 30 {
        u64::from(d)
    } else {
        0
    }
}

/// Drain the MemoryWatcher socket; the frame counter value from the latest datagram
/// that carried it (`None` if nothing new arrived: within the socket's short timeout
/// when `wait`, else already).
fn recv_latest(sock: &UnixDatagram, buf: &mut [u8], wait: bool) -> std::io::Result<Option<u32>> {
    let mut latest = None;
    sock.set_nonblocking(!wait)?;
    loop {
        match sock.recv(buf) {
            Ok(n) => {
                if let Some(v) = parse_watcher_datagram(&buf[..n], addr::FRAME_COUNTER) {
                    latest = Some(v);
                }
                sock.set_nonblocking(true)?;
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break,
            Err(e) => {
                let _ = sock.set_nonblocking(false);
                return Err(e);
            }
        }
    }
    sock.set_nonblocking(false)?;
    Ok(latest)
}

/// A MemoryWatcher datagram: `addr\nvalue\n` pairs in hex, NUL-terminated. Returns the
/// value watched at `want`.
pub fn parse_watcher_datagram(data: &[u8], want: u32) -> Option<u32> {
    let text = std::str::from_utf8(data.split(|b| *b == 0).next()?).ok()?;
    let mut lines = text.lines();
    while let (Some(a), Some(v)) = (lines.next(), lines.next()) {
        let a = a.split_whitespace().next().and_then(|a| u32::from_str_radix(a.trim_start_matches("0x"), 16).ok());
        // Dolphin writes the address as listed (with or without the 0x8 prefix).
        if a.is_some_and(|a| a == want || a | 0x8000_0000 == want) {
            return u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok();
        }
    }
    None
}

impl Dolphin {
    /// One frame of play with the bot's pad and the opponent bot's
    /// ([`menu::Opponent::Bot`]), each through its own port's pipe; as
    /// [`Emulator::step`] otherwise.
    pub fn step_both(&mut self, agent: &Pad, opponent: &Pad) -> Result<(), DolphinError> {
        self.played = true;
        self.stats.skipped += self.step_pads(&[*agent, *opponent], self.cfg.frame_timeout)?;
        Ok(())
    }
}

impl Emulator for Dolphin {
    type Error = DolphinError;

    /// A fresh match. Dolphin is restarted first if it died. `seed` cannot seed a real
    /// game and is ignored.
    fn reset(&mut self, setup: MatchSetup, _seed: u64) -> Result<(), DolphinError> {
        self.reset_traced(setup, &mut |_| {})
    }

    fn step(&mut self, pad: &Pad) -> Result<(), DolphinError> {
        self.played = true;
        // The CPU's port (Melee) gets a neutral pad: a CPU ignores it, and a Dolphin
        // that blocks on every pipe must hear from each.
        self.stats.skipped += self.step_pads(std::slice::from_ref(pad), self.cfg.frame_timeout)?;
        Ok(())
    }

    fn ram(&self) -> RamView<'_> {
        RamView::mem1(self.run.ram.bytes())
    }

    fn setup(&self) -> MatchSetup {
        self.setup
    }

    fn skipped_frames(&self) -> u64 {
        self.stats.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watcher_datagrams_parse() {
        assert_eq!(parse_watcher_datagram(b"80479D60\n0000002a\n\0", addr::FRAME_COUNTER), Some(42));
        assert_eq!(parse_watcher_datagram(b"479d60\n10\n", addr::FRAME_COUNTER), Some(16));
        assert_eq!(parse_watcher_datagram(b"80453130 70\n0000000e\n80479D60\n00000005\n\0junk", addr::FRAME_COUNTER), Some(5));
        assert_eq!(parse_watcher_datagram(b"80453130 70\n0000000e\n", addr::FRAME_COUNTER), None);
        assert_eq!(parse_watcher_datagram(b"\xff\xfe", addr::FRAME_COUNTER), None);
    }

    #[test]
    fn missing_dolphin_and_missing_image_are_clear_errors() {
        let mut cfg = DolphinConfig::melee("/nonexistent/melee.iso", MatchSetup::default());
        cfg.executable = Some("/nonexistent/dolphin-emu-nogui".into());
        let err = Dolphin::launch(cfg.clone()).err().unwrap();
        assert!(matches!(err, DolphinError::NotInstalled { .. }), "{err}");
        cfg.executable = Some("/bin/true".into());
        let err = Dolphin::launch(cfg).err().unwrap();
        assert!(matches!(err, DolphinError::ImageMissing(_)), "{err}");
        assert!(err.to_string().contains("--iso"), "{err}");
    }

    #[test]
    fn game_id_of_an_image() {
        let dir = tempfile::tempdir().unwrap();
        let iso = dir.path().join("melee.iso");
        std::fs::write(&iso, b"GALE01\x02\x00rest of the header").unwrap();
        assert_eq!(image_game_id(&iso).unwrap().as_deref(), Some("GALE01"));
        std::fs::write(&iso, b"\x00\x00\x01\x00 a DOL").unwrap();
        assert_eq!(image_game_id(&iso).unwrap(), None);
        assert!(image_game_id(&dir.path().join("missing")).is_err());
    }
}
