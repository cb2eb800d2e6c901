//! `shine-dolphin-peer`: a stand-in for Dolphin at its boundary, for tests.
//!
//! Launched exactly like Dolphin (`-p headless -v Null -u <user dir> -e <image>`), it
//! does what the Dolphin backend relies on and nothing more:
//! - reads `Config/GCPadNew.ini` to learn which port's pad is `Pipe/0/<name>`, and opens
//!   `Pipes/<name>` `O_RDONLY | O_NONBLOCK`, parsing the pipe protocol line by line;
//! - exposes its "guest RAM" as `/dev/shm/dolphin-emu.<pid>`, created, sized, mapped and
//!   unlinked at once, so `/proc/<pid>/fd` shows `... (deleted)` as for Dolphin;
//! - ticks frames: Melee's frame counter (0x80479D60) moves once per frame, written
//!   last; with `MemoryWatcher/Locations.txt` it also sends the per-frame datagram;
//! - plays Melee with the embedded simulator: the match's RAM window is copied into
//!   the segment every frame; L+R+A+START quits to "character select", which starts
//!   the next match (seed + 1) a few frames later.
//!
//! The "image" is a scenario file of `key = value` lines:
//!
//! | key | meaning (default) |
//! |---|---|
//! | `seed` | seed of the first match; match k uses seed + k (0) |
//! | `cpu_level`, `agent_port`, `opponent_port` | the match setup (9, 1, 0) |
//! | `pace` | `lockstep`: one frame per `FLUSH` once a bot has connected to the pipe (Slippi's blocking pipes; before that the boot runs free at `fps` and waits on its last frame); `free`: `fps` frames a second whatever the bot does, like upstream Dolphin (lockstep) |
//! | `fps` | frames per second when free-running (60) |
//! | `boot_frames` | frames ticked on their own before the first match (10) |
//! | `css_frames` | frames on character select after a quit (20) |
//! | `exit_at_start` | exit with this code right away (tests "exited early") |
//! | `no_ram` | never create the segment (tests "RAM not found") |
//! | `no_frames` | create it but never tick (tests "frame counter never moved") |
//! | `crash_after` | abort after this many frames (tests "Dolphin died") |

use shine_bridge::dolphin::sys::SharedRamWriter;
use shine_bridge::pad::{parse_line, Command};
use shine_bridge::ram::{addr, RamMut, SIM_WINDOW};
use shine_bridge::sim::Sim;
use shine_bridge::{Button, Emulator, MatchSetup, Pad};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Dolphin's segment is larger; MEM1's 32 MiB view is what readers map.
const SEGMENT_SIZE: u64 = 0x0200_0000;

struct Scenario {
    seed: u64,
    setup: MatchSetup,
    lockstep: bool,
    fps: f64,
    boot_frames: u32,
    css_frames: u32,
    exit_at_start: Option<i32>,
    no_ram: bool,
    no_frames: bool,
    crash_after: Option<u64>,
}

fn parse_scenario(text: &str) -> Result<Scenario, String> {
    let mut s = Scenario {
        seed: 0,
        setup: MatchSetup::default(),
        lockstep: true,
        fps: 60.0,
        boot_frames: 10,
        css_frames: 20,
        exit_at_start: None,
        no_ram: false,
        no_frames: false,
        crash_after: None,
    };
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (k, v) = line.split_once('=').map(|(k, v)| (k.trim(), v.trim())).ok_or(format!("scenario line {line:?}: expected key = value"))?;
        let bad = |_| format!("scenario line {line:?}: bad value");
        match k {
            "seed" => s.seed = v.parse().map_err(bad)?,
            "cpu_level" => s.setup.cpu_level = v.parse().map_err(bad)?,
            "agent_port" => s.setup.agent_port = v.parse().map_err(bad)?,
            "opponent_port" => s.setup.opponent_port = v.parse().map_err(bad)?,
            "pace" => s.lockstep = v == "lockstep",
            "fps" => s.fps = v.parse().map_err(|_| format!("scenario line {line:?}: bad value"))?,
            "boot_frames" => s.boot_frames = v.parse().map_err(bad)?,
            "css_frames" => s.css_frames = v.parse().map_err(bad)?,
            "exit_at_start" => s.exit_at_start = Some(v.parse().map_err(bad)?),
            "no_ram" => s.no_ram = v == "true",
            "no_frames" => s.no_frames = v == "true",
            "crash_after" => s.crash_after = Some(v.parse().map_err(bad)?),
            _ => return Err(format!("scenario line {line:?}: unknown key {k:?}")),
        }
    }
    Ok(s)
}

/// `[GCPadN]` ... `Device = Pipe/0/<name>`: (port, name) pairs.
fn pipe_ports(ini: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut port = None;
    for line in ini.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("[GCPad").and_then(|r| r.strip_suffix(']')) {
            port = n.parse::<usize>().ok().and_then(|n| n.checked_sub(1));
        } else if let (Some(p), Some(dev)) = (port, line.strip_prefix("Device = Pipe/")) {
            if let Some((_, name)) = dev.split_once('/') {
                out.push((p, name.to_string()));
            }
        }
    }
    out
}

enum Scene {
    Boot(u32),
    InGame(Box<Sim>),
    PostGame,
    Css(u32),
}

struct Peer {
    ram: SharedRamWriter,
    scen: Scenario,
    scene: Scene,
    matches: u64,
    frame: u32,
    watcher: Option<(std::os::unix::net::UnixDatagram, PathBuf, Vec<u32>)>,
    /// A bot has connected to the pipe (lock-step: no free frames from then on).
    driven: bool,
}

const fn off(a: u32) -> usize {
    (a - addr::MEM1_BASE) as usize
}

impl Peer {
    fn new_match(&mut self) -> Scene {
        let sim = Sim::new(self.scen.setup, self.scen.seed.wrapping_add(self.matches));
        self.matches += 1;
        Scene::InGame(Box::new(sim))
    }

    fn frame(&mut self, pad: &Pad) {
        let quit = [Button::L, Button::R, Button::A, Button::Start].iter().all(|b| pad.pressed(*b));
        let scene = std::mem::replace(&mut self.scene, Scene::Css(0));
        self.scene = match scene {
            // Lock-step, the title screen waits for a bot: the match must start on
            // one of its frames, not run free before it looks.
            Scene::Boot(0) if self.scen.lockstep && !self.driven => Scene::Boot(0),
            Scene::Boot(0) => self.new_match(),
            Scene::Boot(n) => Scene::Boot(n - 1),
            Scene::InGame(_) if quit => Scene::Css(self.scen.css_frames),
            Scene::InGame(mut sim) => {
                let _ = sim.step(pad);
                let over = [0, 1].iter().any(|p| sim.ram().player(*p).and_then(|pl| pl.stocks()).is_ok_and(|s| s == 0));
                if over {
                    Scene::PostGame
                } else {
                    Scene::InGame(sim)
                }
            }
            Scene::PostGame if pad.pressed(Button::Start) => Scene::Css(self.scen.css_frames),
            Scene::PostGame => Scene::PostGame,
            Scene::Css(0) => self.new_match(),
            Scene::Css(n) => Scene::Css(n - 1),
        };
        if let Scene::InGame(sim) = &self.scene {
            copy_window(&mut self.ram, sim);
        }
        self.publish(pad);
    }

    /// Scene bytes, the pad Melee would read, then the frame counter, last.
    fn publish(&mut self, pad: &Pad) {
        let (major, minor) = match self.scene {
            Scene::Boot(_) => (0, 0),
            Scene::InGame(_) => (2, 2),
            Scene::PostGame => (2, 4),
            Scene::Css(_) => (2, 0),
        };
        let port = self.scen.setup.agent_port;
        {
            let mut w = RamMut::mem1(self.ram.bytes_mut());
            let _ = w.set_u8(addr::SCENE, major);
            let _ = w.set_u8(addr::MENU, minor);
            if !matches!(self.scene, Scene::InGame(_)) {
                // Outside a match the fighter pointers are null, as in Melee's menus.
                for p in 0..4 {
                    let _ = w.set_u32(shine_bridge::ram::static_block(p) + shine_bridge::ram::static_player::FIGHTER_PTR, 0);
                }
            }
            let pb = shine_bridge::ram::pad_block_addr(port);
            let (mx, my) = pad.main.to_melee();
            let (cx, cy) = pad.c.to_melee();
            let _ = w.set_u32(pb, pad.melee_buttons());
            for (o, v) in [(0x20, mx), (0x24, my), (0x28, cx), (0x2C, cy), (0x30, pad.l), (0x34, pad.r)] {
                let _ = w.set_f32(pb + o, v);
            }
        }
        self.frame = self.frame.wrapping_add(1);
        self.ram.publish_u32_be(off(addr::FRAME_COUNTER), self.frame);
        if let Some((sock, path, watch)) = &self.watcher {
            let mut msg = String::new();
            for a in watch {
                let v = shine_bridge::RamView::mem1(self.ram.bytes()).u32(*a).unwrap_or(0);
                msg.push_str(&format!("{a:x}\n{v:x}\n"));
            }
            msg.push('\0');
            // Dolphin ignores a client that is not listening; so do we.
            let _ = sock.send_to(msg.as_bytes(), path);
        }
    }
}

/// Copy the match's RAM window into the segment, except the frame counter, which
/// only `Peer::publish` writes (last, atomically).
fn copy_window(ram: &mut SharedRamWriter, sim: &Sim) {
    let bytes = sim.ram().bytes();
    let base = off(SIM_WINDOW.start);
    let fc = off(addr::FRAME_COUNTER) - base;
    let mem = ram.bytes_mut();
    mem[base..base + fc].copy_from_slice(&bytes[..fc]);
    mem[base + fc + 4..base + bytes.len()].copy_from_slice(&bytes[fc + 4..]);
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--version") {
        println!("Dolphin-compatible test peer (shine-dolphin-peer {})", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let user = PathBuf::from(value("-u").ok_or("missing -u <user dir>")?);
    let image = PathBuf::from(value("-e").ok_or("missing -e <image>")?);
    let text = std::fs::read_to_string(&image).map_err(|e| format!("Could not boot the specified file {}: {e}", image.display()))?;
    let scen = parse_scenario(&text)?;
    eprintln!("peer: pid {}, user dir {}, scenario {}", std::process::id(), user.display(), image.display());
    if let Some(code) = scen.exit_at_start {
        eprintln!("peer: exiting at start with code {code}, as the scenario asks");
        std::process::exit(code);
    }
    // Controller pipe(s), opened as Dolphin does when it populates its devices.
    let ini = std::fs::read_to_string(user.join("Config/GCPadNew.ini")).unwrap_or_default();
    let mut pipe = None;
    for (port, name) in pipe_ports(&ini) {
        if port == scen.setup.agent_port {
            let path = user.join("Pipes").join(&name);
            pipe = Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&path)
                    .map_err(|e| format!("opening pipe {}: {e}", path.display()))?,
            );
        }
    }
    let pipe = pipe.ok_or("GCPadNew.ini maps no pipe to the agent's port")?;
    if scen.no_ram {
        eprintln!("peer: not exposing RAM, as the scenario asks");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    // Guest RAM: created, mapped, unlinked, as Dolphin does.
    let shm = Path::new("/dev/shm").join(format!("dolphin-emu.{}", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&shm).map_err(|e| format!("creating {}: {e}", shm.display()))?;
    file.set_len(SEGMENT_SIZE).map_err(|e| e.to_string())?;
    let ram = SharedRamWriter::open(&file, SEGMENT_SIZE as usize).map_err(|e| e.to_string())?;
    std::fs::remove_file(&shm).map_err(|e| e.to_string())?;
    let watcher = match std::fs::read_to_string(user.join("MemoryWatcher/Locations.txt")) {
        Ok(list) => {
            let watch: Vec<u32> = list.lines().filter_map(|l| u32::from_str_radix(l.trim(), 16).ok()).map(|a| a | 0x8000_0000).collect();
            let sock = std::os::unix::net::UnixDatagram::unbound().map_err(|e| e.to_string())?;
            Some((sock, user.join("MemoryWatcher/MemoryWatcher"), watch))
        }
        Err(_) => None,
    };
    let boot = scen.boot_frames;
    let mut peer = Peer { ram, scen, scene: Scene::Boot(boot), matches: 0, frame: 0, watcher, driven: false };
    if peer.scen.no_frames {
        eprintln!("peer: never ticking, as the scenario asks");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let period = Duration::from_secs_f64(1.0 / peer.scen.fps.max(1.0));
    let mut input = Input { pipe, pad: Pad::NEUTRAL, partial: String::new(), buf: [0u8; 4096] };
    let mut next_free = Instant::now() + period;
    let mut frames = 0u64;
    loop {
        let (got, flushes) = input.drain(&mut peer, &mut frames)?;
        // Free-running (upstream Dolphin), or lock-step but nobody connected yet (the
        // game runs before anyone plays). Lock-step, look at the pipe once more right
        // before a free frame: a bot that has just connected must never see a free
        // frame after it sent its first pad, or it would take that frame for its own
        // and run one frame behind from then on.
        let free = |peer: &Peer| !peer.scen.lockstep || !peer.driven;
        if free(&peer) && Instant::now() >= next_free {
            if peer.scen.lockstep {
                input.drain(&mut peer, &mut frames)?;
            }
            if free(&peer) {
                let pad = input.pad;
                peer.frame(&pad);
                frames += 1;
            }
            next_free += period;
        }
        if let Some(n) = peer.scen.crash_after {
            if frames >= n {
                eprintln!("peer: crashing after {frames} frames, as the scenario asks");
                std::process::abort();
            }
        }
        if !got && flushes == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// The controller pipe's reading end and the pad as the lines so far set it.
struct Input {
    pipe: std::fs::File,
    pad: Pad,
    partial: String,
    buf: [u8; 4096],
}

impl Input {
    /// Read what is in the pipe: apply pad lines, and in lock-step run one frame per
    /// `FLUSH`. Returns whether anything came, and how many frames ran. A writer that
    /// is connected (no EOF) makes the peer driven: lock-step from then on.
    fn drain(&mut self, peer: &mut Peer, frames: &mut u64) -> Result<(bool, u32), String> {
        let (mut got, mut flushes) = (false, 0u32);
        loop {
            match self.pipe.read(&mut self.buf) {
                Ok(0) => break, // no writer (yet): EOF on a FIFO
                Ok(n) => {
                    got = true;
                    peer.driven = true;
                    self.partial.push_str(&String::from_utf8_lossy(&self.buf[..n]));
                    while let Some(i) = self.partial.find('\n') {
                        let line: String = self.partial.drain(..=i).collect();
                        match parse_line(&line) {
                            Ok(Command::Flush) if peer.scen.lockstep => {
                                // Lock-step: this frame runs with the pad as it stands.
                                peer.frame(&self.pad);
                                *frames += 1;
                                flushes += 1;
                            }
                            Ok(c) => self.pad.apply(c),
                            // Dolphin ignores lines it does not understand; so do we.
                            Err(e) => eprintln!("peer: {e}"),
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    peer.driven = true; // a writer is connected, with nothing to say yet
                    break;
                }
                Err(e) => return Err(format!("reading the pipe: {e}")),
            }
        }
        Ok((got, flushes))
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("shine-dolphin-peer: {e}");
        std::process::exit(1);
    }
}
