//! `shine-dolphin-peer`: a stand-in for Dolphin at its boundary, for tests.
//!
//! Launched exactly like Dolphin (`-p headless -v Null -u <user dir> -e <image>`), it
//! does what the Dolphin backend relies on and nothing more:
//! - reads `Config/GCPadNew.ini` to learn which ports' pads are `Pipe/0/<name>`, and
//!   opens each `Pipes/<name>` `O_RDONLY | O_NONBLOCK`, parsing the pipe protocol line
//!   by line: one pad, and one hand on the menus, per port; a port with another device
//!   there, or `SIDeviceN = 12` (the GameCube controller adapter) in
//!   `Config/Dolphin.ini`, is a person's, played by a stand-in ([`menus`]);
//! - exposes its "guest RAM" as `/dev/shm/dolphin-emu.<pid>`, created, sized, mapped and
//!   unlinked at once, so `/proc/<pid>/fd` shows `... (deleted)` as for Dolphin;
//! - ticks frames: Melee's frame counter (0x80479D60) moves once per frame, written
//!   last; with `MemoryWatcher/Locations.txt` it also sends the per-frame datagram;
//! - plays Melee's menus with the references' RAM layout ([`menus`]) and the match
//!   with the embedded simulator, whose RAM window is copied into the segment every
//!   frame.
//!
//! The "image" is a scenario file of `key = value` lines; a first line starting with
//! `GALE01` (a disc header, for `doctor`'s image check) is skipped:
//!
//! | key | meaning (default) |
//! |---|---|
//! | `seed` | seed of the first match; match k uses seed + k (0) |
//! | `stocks` | stocks per fighter (4) |
//! | `time_limit` | Melee's time limit, seconds of play: then "TIME!" and the results, whatever the stocks (none) |
//! | `boot_to` | `css`: boot straight to character select, as the boot-to-CSS Gecko code does; `title`: to the title screen (css) |
//! | `cpu_level_start` | the level a port's slider shows when it becomes a CPU (1) |
//! | `missed_pauses` | the first this many pauses in a match are missed (0) |
//! | `slot_N` | what port N's slot (1..=4) starts as: `human`, `cpu` or `off` (human when plugged) |
//! | `human_character` | the character a person's stand-in picks, by name, or several separated by commas: match k (counted from 0, every match started) gets the k-th, modulo their number, so the person changes character between matches (Luigi) |
//! | `human_wait` | frames the stand-in's hand rests at every visit of character select before it moves: a person who takes their time (0) |
//! | `human_mistake` | at its first visit, its coin down, the stand-in: `toggle`: presses its own HMN/CPU toggle by mistake (its slot becomes a CPU) and starts that match, and at the next visit sets the slot back to HMN; `bot_toggle`: presses the bot's HMN/CPU toggle (the bot's slot becomes a CPU) and START the frame after (none) |
//! | `human_unplug` | frames the person's controller is unplugged at the start of the first visit of character select: the hand's state 3, its human slot turned to CPU (0) |
//! | `human_level` | the level at which the simulator's CPU plays the person's side (5) |
//! | `stage_load_ms` | the frame counter stands still this long once the stage is chosen, as during Melee's stage load (0) |
//! | `pace` | `lockstep`: once a bot has connected, one frame per `FLUSH` on every connected pipe (Slippi's blocking pipes; before that the boot runs free at `fps` and waits on its last frame); `free`: `fps` frames a second whatever the bot does, like upstream Dolphin (lockstep) |
//! | `fps` | frames per second when free-running (60) |
//! | `boot_frames` | frames ticked on their own before the menus (10) |
//! | `exit_at_start` | exit with this code right away (tests "exited early") |
//! | `no_ram` | never create the segment (tests "RAM not found") |
//! | `no_frames` | create it but never tick (tests "frame counter never moved") |
//! | `crash_after` | abort after this many frames of play (tests "Dolphin died") |

#![deny(unsafe_code)]

mod layout;
mod menus;

use menus::{MenuScenario, Menus, Mistake, Plug, Screen};
use shine_bridge::dolphin::sys::SharedRamWriter;
use shine_bridge::pad::{parse_line, Command};
use shine_bridge::ram::{addr, RamMut, SIM_WINDOW};
use shine_bridge::sim::Sim;
use shine_bridge::{Emulator, MatchSetup, Pad};
use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Dolphin's segment is larger; MEM1's 32 MiB view is what readers map.
const SEGMENT_SIZE: u64 = 0x0200_0000;

struct Scenario {
    menus: MenuScenario,
    stage_load: Duration,
    lockstep: bool,
    fps: f64,
    boot_frames: u32,
    exit_at_start: Option<i32>,
    no_ram: bool,
    no_frames: bool,
    crash_after: Option<u64>,
}

fn parse_scenario(text: &str) -> Result<Scenario, String> {
    let mut s = Scenario {
        menus: MenuScenario {
            boot_to_title: false,
            missed_pauses: 0,
            cpu_level_start: 1,
            seed: 0,
            stocks: MatchSetup::default().stocks,
            time_limit: None,
            slots: [None; 4],
            human_icons: vec![icon_by_name("Luigi").expect("Luigi is on the grid")],
            human_wait: 0,
            human_mistake: Mistake::None,
            human_unplug: 0,
            human_level: 5,
        },
        stage_load: Duration::ZERO,
        lockstep: true,
        fps: 60.0,
        boot_frames: 10,
        exit_at_start: None,
        no_ram: false,
        no_frames: false,
        crash_after: None,
    };
    let body = if text.starts_with("GALE01") { text.split_once('\n').map_or("", |(_, rest)| rest) } else { text };
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (k, v) = line.split_once('=').map(|(k, v)| (k.trim(), v.trim())).ok_or(format!("scenario line {line:?}: expected key = value"))?;
        let bad = || format!("scenario line {line:?}: bad value");
        match k {
            "seed" => s.menus.seed = v.parse().map_err(|_| bad())?,
            "stocks" => s.menus.stocks = v.parse().map_err(|_| bad())?,
            "time_limit" => s.menus.time_limit = Some(v.parse().ok().filter(|&t| t > 0).ok_or_else(bad)?),
            "boot_to" => {
                s.menus.boot_to_title = match v {
                    "title" => true,
                    "css" => false,
                    _ => return Err(bad()),
                }
            }
            "cpu_level_start" => s.menus.cpu_level_start = v.parse().ok().filter(|l| (1..=9).contains(l)).ok_or_else(bad)?,
            "missed_pauses" => s.menus.missed_pauses = v.parse().map_err(|_| bad())?,
            "slot_1" | "slot_2" | "slot_3" | "slot_4" => {
                let p = usize::from(k.as_bytes()[5] - b'1');
                s.menus.slots[p] = Some(match v {
                    "human" => layout::HUMAN,
                    "cpu" => layout::CPU,
                    "off" => layout::OFF,
                    _ => return Err(bad()),
                });
            }
            "human_character" => s.menus.human_icons = v.split(',').map(|name| icon_by_name(name.trim())).collect::<Option<Vec<u8>>>().ok_or_else(bad)?,
            "human_wait" => s.menus.human_wait = v.parse().map_err(|_| bad())?,
            "human_mistake" => {
                s.menus.human_mistake = match v {
                    "toggle" => Mistake::Toggle,
                    "bot_toggle" => Mistake::BotToggle,
                    "none" => Mistake::None,
                    _ => return Err(bad()),
                }
            }
            "human_unplug" => s.menus.human_unplug = v.parse().map_err(|_| bad())?,
            "human_level" => s.menus.human_level = v.parse().ok().filter(|l| (1..=9).contains(l)).ok_or_else(bad)?,
            "stage_load_ms" => s.stage_load = Duration::from_millis(v.parse().map_err(|_| bad())?),
            "pace" => s.lockstep = v == "lockstep",
            "fps" => s.fps = v.parse().map_err(|_| bad())?,
            "boot_frames" => s.boot_frames = v.parse().map_err(|_| bad())?,
            "exit_at_start" => s.exit_at_start = Some(v.parse().map_err(|_| bad())?),
            "no_ram" => s.no_ram = v == "true",
            "no_frames" => s.no_frames = v == "true",
            "crash_after" => s.crash_after = Some(v.parse().map_err(|_| bad())?),
            _ => return Err(format!("scenario line {line:?}: unknown key {k:?}")),
        }
    }
    Ok(s)
}

/// An icon by its character's name on the grid (case-insensitive).
fn icon_by_name(name: &str) -> Option<u8> {
    layout::GRID.iter().position(|(n, _, _)| n.eq_ignore_ascii_case(name)).map(|i| i as u8)
}

/// `[GCPadN]` ... `Device = Pipe/0/<name>`: (port, name) pairs.
fn pipe_ports(ini: &str) -> Vec<(usize, String)> {
    gcpad_devices(ini).into_iter().filter_map(|(p, dev)| Some((p, dev.strip_prefix("Pipe/")?.split_once('/')?.1.to_string()))).collect()
}

/// `[GCPadN]` ... `Device = <device>`: (port, device) pairs.
fn gcpad_devices(ini: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let mut port = None;
    for line in ini.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("[GCPad").and_then(|r| r.strip_suffix(']')) {
            port = n.parse::<usize>().ok().and_then(|n| n.checked_sub(1));
        } else if let (Some(p), Some(dev)) = (port, line.strip_prefix("Device = ")) {
            out.push((p, dev.to_string()));
        }
    }
    out
}

/// Ports a person plays: a `[GCPadN]` device that is not a pipe, or `SIDeviceN = 12`
/// (Dolphin's `SIDEVICE_WIIU_ADAPTER`, the GameCube controller adapter) in Dolphin.ini.
fn person_ports(gcpad: &str, dolphin_ini: &str) -> [bool; 4] {
    let mut out = [false; 4];
    for (p, dev) in gcpad_devices(gcpad) {
        if p < 4 && !dev.starts_with("Pipe/") {
            out[p] = true;
        }
    }
    for line in dolphin_ini.lines().map(str::trim) {
        if let Some((k, v)) = line.strip_prefix("SIDevice").and_then(|r| r.split_once('=')) {
            if let (Ok(p), "12") = (k.trim().parse::<usize>(), v.trim()) {
                if p < 4 {
                    out[p] = true;
                }
            }
        }
    }
    out
}

struct Peer {
    ram: SharedRamWriter,
    stage_load: Duration,
    boot_left: u32,
    menus: Menus,
    frame: u32,
    /// Frames of play so far (for `crash_after`).
    played: u64,
    crash_after: Option<u64>,
    watcher: Option<(std::os::unix::net::UnixDatagram, PathBuf, Vec<u32>)>,
}

const fn off(a: u32) -> usize {
    (a - addr::MEM1_BASE) as usize
}

impl Peer {
    /// One frame with each port's pad (`None`: no pipe there).
    fn frame(&mut self, pads: &[Option<Pad>; 4]) {
        if self.boot_left > 0 {
            self.boot_left -= 1;
            if self.boot_left == 0 {
                self.menus.booted();
            }
        } else {
            let was_in_game = self.menus.in_game();
            self.menus.frame(pads);
            if !was_in_game && self.menus.in_game() && !self.stage_load.is_zero() {
                // Melee loads the stage between the last stage-select frame and the
                // first frame of the match: nothing ticks meanwhile.
                eprintln!("peer: loading the stage for {:?}, as the scenario asks", self.stage_load);
                std::thread::sleep(self.stage_load);
            }
        }
        if let Screen::InGame { sim, .. } = &self.menus.screen {
            copy_window(&mut self.ram, sim);
            self.played += 1;
            if self.crash_after.is_some_and(|n| self.played >= n) {
                eprintln!("peer: crashing after {} frames of play, as the scenario asks", self.played);
                std::process::abort();
            }
        }
        self.publish(pads);
    }

    /// The menus' bytes, the pads Melee would read, then the frame counter, last.
    fn publish(&mut self, pads: &[Option<Pad>; 4]) {
        {
            let mut w = RamMut::mem1(self.ram.bytes_mut());
            self.menus.publish(&mut w);
            for (port, pad) in pads.iter().enumerate() {
                // A CPU's pad block is the game's own (the simulator's CPU writes it).
                let Some(pad) = pad.filter(|_| !self.menus.is_cpu(port)) else { continue };
                let pb = shine_bridge::ram::pad_block_addr(port);
                let (mx, my) = pad.main.to_melee();
                let (cx, cy) = pad.c.to_melee();
                let _ = w.set_u32(pb, pad.melee_buttons());
                for (o, v) in [(0x20, mx), (0x24, my), (0x28, cx), (0x2C, cy), (0x30, pad.l), (0x34, pad.r)] {
                    let _ = w.set_f32(pb + o, v);
                }
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
    // Controller pipes, opened as Dolphin does when it populates its devices.
    let ini = std::fs::read_to_string(user.join("Config/GCPadNew.ini")).unwrap_or_default();
    let mut pipes = vec![];
    for (port, name) in pipe_ports(&ini) {
        let path = user.join("Pipes").join(&name);
        let file =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).map_err(|e| format!("opening pipe {}: {e}", path.display()))?;
        pipes.push(PipeIn { port, file, pad: Pad::NEUTRAL, partial: String::new(), connected: false, flushed: VecDeque::new() });
    }
    if pipes.is_empty() {
        return Err("GCPadNew.ini maps no port to a pipe".into());
    }
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
    let persons = person_ports(&ini, &std::fs::read_to_string(user.join("Config/Dolphin.ini")).unwrap_or_default());
    let plugs = std::array::from_fn(|p| match (pipes.iter().any(|i| i.port == p), persons[p]) {
        (true, _) => Plug::Pipe,
        (false, true) => Plug::Person,
        (false, false) => Plug::Nothing,
    });
    let menus = Menus::new(scen.menus.clone(), plugs);
    let mut peer = Peer { ram, stage_load: scen.stage_load, boot_left: scen.boot_frames.max(1), menus, frame: 0, played: 0, crash_after: scen.crash_after, watcher };
    if scen.no_frames {
        eprintln!("peer: never ticking, as the scenario asks");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let period = Duration::from_secs_f64(1.0 / scen.fps.max(1.0));
    let mut input = Inputs { pipes, buf: [0u8; 4096] };
    let mut next_free = Instant::now() + period;
    loop {
        let got = input.drain(scen.lockstep)?;
        let mut ran = 0;
        if scen.lockstep {
            while let Some(pads) = input.next_lockstep_frame() {
                peer.frame(&pads);
                ran += 1;
            }
        }
        // Free-running (upstream Dolphin), or lock-step but nobody connected yet (the
        // game runs before anyone plays). Lock-step, look at the pipes once more right
        // before a free frame: a bot that has just connected must never see a free
        // frame after it sent its first pad, or it would take that frame for its own
        // and run one frame behind from then on.
        let free = |input: &Inputs| !scen.lockstep || !input.driven();
        if free(&input) && Instant::now() >= next_free {
            if scen.lockstep {
                input.drain(true)?;
            }
            if free(&input) {
                peer.frame(&input.current());
            }
            next_free += period;
        }
        if !got && ran == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// One port's pipe: its reading end, the pad as the lines so far set it, and (lock-step)
/// the pads of the frames it has flushed and that have not run yet.
struct PipeIn {
    port: usize,
    file: std::fs::File,
    pad: Pad,
    partial: String,
    /// A writer is connected (no EOF): lock-step waits for its flushes.
    connected: bool,
    flushed: VecDeque<Pad>,
}

struct Inputs {
    pipes: Vec<PipeIn>,
    buf: [u8; 4096],
}

impl Inputs {
    /// Read what is in every pipe: apply pad lines and, lock-step, queue the pad as it
    /// stands at each `FLUSH`. Returns whether anything came.
    fn drain(&mut self, lockstep: bool) -> Result<bool, String> {
        let mut got = false;
        for pipe in &mut self.pipes {
            loop {
                match pipe.file.read(&mut self.buf) {
                    Ok(0) => {
                        pipe.connected = false; // no writer (yet, or any more): EOF on a FIFO
                        break;
                    }
                    Ok(n) => {
                        got = true;
                        pipe.connected = true;
                        pipe.partial.push_str(&String::from_utf8_lossy(&self.buf[..n]));
                        while let Some(i) = pipe.partial.find('\n') {
                            let line: String = pipe.partial.drain(..=i).collect();
                            match parse_line(&line) {
                                // Lock-step: that frame runs with the pad as it stands.
                                Ok(Command::Flush) if lockstep => pipe.flushed.push_back(pipe.pad),
                                Ok(c) => pipe.pad.apply(c),
                                // Dolphin ignores lines it does not understand; so do we.
                                Err(e) => eprintln!("peer: {e}"),
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        pipe.connected = true; // a writer is connected, with nothing to say yet
                        break;
                    }
                    Err(e) => return Err(format!("reading the pipe of port {}: {e}", pipe.port)),
                }
            }
        }
        Ok(got)
    }

    /// A bot has connected to some pipe (lock-step: no free frames from then on).
    fn driven(&self) -> bool {
        self.pipes.iter().any(|p| p.connected || !p.flushed.is_empty())
    }

    /// Lock-step: the next frame's pads once every connected pipe has flushed one.
    fn next_lockstep_frame(&mut self) -> Option<[Option<Pad>; 4]> {
        let waiting = |p: &PipeIn| p.connected || !p.flushed.is_empty();
        if !self.driven() || self.pipes.iter().any(|p| waiting(p) && p.flushed.is_empty()) {
            return None;
        }
        let mut pads = self.current();
        for p in self.pipes.iter_mut().filter(|p| !p.flushed.is_empty()) {
            pads[p.port] = p.flushed.pop_front();
        }
        Some(pads)
    }

    /// Each port's pad as it stands (`None`: no pipe on that port).
    fn current(&self) -> [Option<Pad>; 4] {
        let mut pads = [None; 4];
        for p in &self.pipes {
            pads[p.port] = Some(p.pad);
        }
        pads
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("shine-dolphin-peer: {e}");
        std::process::exit(1);
    }
}
