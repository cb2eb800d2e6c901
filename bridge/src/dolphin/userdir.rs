//! The per-instance Dolphin user folder (docs/melee-reference.md, section 5): everything Dolphin
//! reads at start-up, written fresh for each instance so workers never share state.
//!
//! ```text
//! <dir>/Config/Dolphin.ini          JIT, fastmem, DSP HLE, no audio and Null video (or,
//!                                   for a person to play, Dolphin's own), cheats on,
//!                                   standard controllers on the two match ports, no
//!                                   memory cards, speed
//! <dir>/Config/GCPadNew.ini         each driven port mapped to Pipe/0/bot<port + 1>; a
//!                                   person's port to their pad (unless it is the
//!                                   GameCube controller adapter, which needs no mapping)
//! <dir>/Pipes/bot<port + 1>         one controller FIFO per driven port (the bot's, and
//!                                   the CPU's, whose own hand sets it up on the menus);
//!                                   they must exist before Dolphin starts
//! <dir>/GameSettings/GALE01.ini     Gecko "$Netplay Community Settings": boot to CSS
//! <dir>/MemoryWatcher/Locations.txt optional: watch the frame counter (end-of-frame tick)
//! <dir>/dolphin.log                 Dolphin's stdout and stderr
//! ```
//!
//! Paths are kept short because the MemoryWatcher socket lives inside the folder and a
//! Unix socket path holds at most 107 bytes plus its NUL.

use super::DolphinError;
use std::path::{Path, PathBuf};

/// `sun_path` is 108 bytes on Linux, including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// How fast Dolphin runs the game.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speed {
    /// As fast as the host allows (training).
    #[default]
    Unlimited,
    /// 60 frames per second (watching, or matching the paper's real-time setting).
    RealTime,
}

/// Whether anyone watches: a bot alone needs no picture or sound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Display {
    /// No window, Null video, no audio (training, `play` against the CPU).
    #[default]
    Headless,
    /// An X11 window with OpenGL video and Dolphin's default sound (a person plays).
    Window,
}

impl Display {
    /// The platform and video backend arguments of `dolphin-emu-nogui`.
    pub fn args(self) -> [&'static str; 4] {
        match self {
            Display::Headless => ["-p", "headless", "-v", "Null"],
            Display::Window => ["-p", "x11", "-v", "OGL"],
        }
    }
}

impl Speed {
    fn ini_value(self) -> &'static str {
        match self {
            Speed::Unlimited => "0.0",
            Speed::RealTime => "1.0",
        }
    }
}

/// A person's controller, on a port of their own (`shine-worker play --human-port`).
#[derive(Debug, Clone, PartialEq)]
pub enum HumanPad {
    /// Nintendo's GameCube controller adapter (or a clone in its Wii U mode): Dolphin
    /// reads it directly (`SIDevice = 12`, Dolphin's `SIDEVICE_WIIU_ADAPTER`); no
    /// mapping.
    Adapter,
    /// Any other pad Dolphin sees, as a standard controller (`SIDevice = 6`): its
    /// device string (`evdev/0/<name>`, `SDL/0/<name>`, ...) and its mapping, the
    /// `key = value` lines of a Dolphin GCPad profile.
    Mapped { device: String, mapping: Vec<(String, String)> },
}

impl HumanPad {
    /// A pad from a Dolphin GCPad profile (what Dolphin's Controllers window saves as
    /// `Config/Profiles/GCPad/<name>.ini`): its `[Profile]` lines, `Device` among them.
    /// `device` replaces the profile's own device string.
    pub fn from_profile(text: &str, device: Option<&str>) -> Result<HumanPad, String> {
        let mut in_profile = false;
        let mut found_device = None;
        let mut mapping = vec![];
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_profile = line == "[Profile]";
                continue;
            }
            if !in_profile || line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line.split_once('=').ok_or(format!("the profile line {line:?} is not `key = value`"))?;
            let (k, v) = (k.trim(), v.trim());
            if k == "Device" {
                found_device = Some(v.to_string());
            } else {
                mapping.push((k.to_string(), v.to_string()));
            }
        }
        if mapping.is_empty() {
            return Err("the profile has no [Profile] section with button mappings (save one in Dolphin: Controllers, Configure, Profile, Save)".into());
        }
        let device = device.map(str::to_string).or(found_device).ok_or("the profile names no Device; give one")?;
        Ok(HumanPad::Mapped { device, mapping })
    }
}

/// What the folder should configure.
#[derive(Debug, Clone)]
pub struct UserDirSpec {
    /// The ports Shine drives, 0-based, each with its own FIFO: the bot's first, then
    /// the CPU's (its hand sets it up on the character-select screen).
    pub pipe_ports: Vec<usize>,
    pub speed: Speed,
    pub display: Display,
    /// Write `MemoryWatcher/Locations.txt` watching these (hex, Dolphin's syntax).
    pub memory_watcher: Option<Vec<String>>,
    /// Enable the boot-to-character-select Gecko code for Melee.
    pub boot_to_css: bool,
    /// A person's port (0-based) and their controller.
    pub human: Option<(usize, HumanPad)>,
}

/// The files of one instance's folder.
#[derive(Debug, Clone)]
pub struct UserDir {
    pub root: PathBuf,
    /// One FIFO per driven port, in [`UserDirSpec::pipe_ports`]' order.
    pub pipes: Vec<PathBuf>,
    pub log: PathBuf,
    pub watcher_socket: Option<PathBuf>,
}

/// Dolphin's numbers for the devices on a serial port (`SIDevices` in Dolphin's
/// `Source/Core/Core/HW/SI/SI_Device.h`): a standard GameCube controller, and the
/// GameCube controller adapter for Wii U.
const SI_GC_CONTROLLER: u32 = 6;
const SI_WIIU_ADAPTER: u32 = 12;
const SI_NONE: u32 = 0;
/// Dolphin's number for an empty memory-card slot (`EXIDeviceType::None`): the paper's
/// setup plays with none, so no save prompt or card check can stall the menus.
const EXI_NONE: u32 = 255;

pub fn dolphin_ini(spec: &UserDirSpec) -> String {
    let mut si = String::new();
    for port in 0..4 {
        let dev = match &spec.human {
            Some((p, HumanPad::Adapter)) if *p == port => SI_WIIU_ADAPTER,
            Some((p, HumanPad::Mapped { .. })) if *p == port => SI_GC_CONTROLLER,
            _ if spec.pipe_ports.contains(&port) => SI_GC_CONTROLLER,
            _ => SI_NONE,
        };
        si.push_str(&format!("SIDevice{port} = {dev}\n"));
    }
    // Headless: no picture, no sound. A window: OpenGL, and Dolphin's default sound.
    let (video, dsp) = match spec.display {
        Display::Headless => ("Null", "[DSP]\nBackend = No Audio Output\n"),
        Display::Window => ("OGL", ""),
    };
    format!(
        "[Core]\nCPUCore = 1\nFastmem = True\nDSPHLE = True\nEnableCheats = True\n{si}SlotA = {EXI_NONE}\nSlotB = {EXI_NONE}\n\
         EmulationSpeed = {speed}\nGFXBackend = {video}\n\
         {dsp}\
         [Input]\nBackgroundInput = True\n\
         [Interface]\nConfirmStop = False\n\
         [Analytics]\nEnabled = False\nPermissionAsked = True\n",
        speed = spec.speed.ini_value()
    )
}

/// The FIFO's name for a port: `bot1` for port 0.
pub fn pipe_name(port: usize) -> String {
    format!("bot{}", port + 1)
}

/// `[GCPad<n>]` for each driven port, mapped to its FIFO (docs/melee-reference.md, section 4), and
/// for a person's mapped pad its device and mapping.
pub fn gcpad_ini(ports: &[usize], human: Option<&(usize, HumanPad)>) -> String {
    let mut out: String = ports.iter().map(|&p| gcpad_section(p)).collect();
    if let Some((port, HumanPad::Mapped { device, mapping })) = human {
        out.push_str(&format!("[GCPad{}]\nDevice = {device}\n", port + 1));
        for (k, v) in mapping {
            out.push_str(&format!("{k} = {v}\n"));
        }
    }
    out
}

fn gcpad_section(port: usize) -> String {
    let mut s = format!("[GCPad{}]\nDevice = Pipe/0/{}\n", port + 1, pipe_name(port));
    for (k, v) in [
        ("Buttons/A", "Button A"),
        ("Buttons/B", "Button B"),
        ("Buttons/X", "Button X"),
        ("Buttons/Y", "Button Y"),
        ("Buttons/Z", "Button Z"),
        ("Buttons/Start", "Button START"),
        ("Main Stick/Up", "Axis MAIN Y +"),
        ("Main Stick/Down", "Axis MAIN Y -"),
        ("Main Stick/Left", "Axis MAIN X -"),
        ("Main Stick/Right", "Axis MAIN X +"),
        ("C-Stick/Up", "Axis C Y +"),
        ("C-Stick/Down", "Axis C Y -"),
        ("C-Stick/Left", "Axis C X -"),
        ("C-Stick/Right", "Axis C X +"),
        ("Triggers/L", "Button L"),
        ("Triggers/R", "Button R"),
        ("Triggers/L-Analog", "Axis L +"),
        ("Triggers/R-Analog", "Axis R +"),
        ("D-Pad/Up", "Button D_UP"),
        ("D-Pad/Down", "Button D_DOWN"),
        ("D-Pad/Left", "Button D_LEFT"),
        ("D-Pad/Right", "Button D_RIGHT"),
    ] {
        s.push_str(&format!("{k} = `{v}`\n"));
    }
    s
}

/// Enables the code Dolphin ships in `Sys/GameSettings/GALE01r2.ini`.
pub const MELEE_GAME_SETTINGS: &str = "[Gecko_Enabled]\n$Netplay Community Settings\n";

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> DolphinError + 'a {
    move |source| DolphinError::UserDir { path: path.to_path_buf(), what, source }
}

impl UserDir {
    /// Create (or refresh) the folder at `root`. An existing folder is reused: config
    /// files are rewritten and a stale FIFO is replaced.
    pub fn create(root: &Path, spec: &UserDirSpec) -> Result<UserDir, DolphinError> {
        let watcher_socket = spec.memory_watcher.as_ref().map(|_| root.join("MemoryWatcher").join("MemoryWatcher"));
        if let Some(sock) = &watcher_socket {
            let len = sock.as_os_str().len();
            if len > MAX_SOCKET_PATH {
                return Err(DolphinError::PathTooLong { path: sock.clone(), len, max: MAX_SOCKET_PATH });
            }
        }
        if let Some(p) = spec.pipe_ports.iter().chain(spec.human.iter().map(|(p, _)| p)).find(|p| **p > 3) {
            return Err(DolphinError::Config(format!("port {p} is out of range (0..=3)")));
        }
        if let Some((p, _)) = spec.human.as_ref().filter(|(p, _)| spec.pipe_ports.contains(p)) {
            return Err(DolphinError::Config(format!("port {} cannot be both a person's and a pipe", p + 1)));
        }
        for sub in ["Config", "Pipes", "GameSettings"] {
            let p = root.join(sub);
            std::fs::create_dir_all(&p).map_err(io_err(&p, "creating"))?;
        }
        let write = |rel: &str, text: &str| -> Result<(), DolphinError> {
            let p = root.join(rel);
            std::fs::write(&p, text).map_err(io_err(&p, "writing"))
        };
        write("Config/Dolphin.ini", &dolphin_ini(spec))?;
        write("Config/GCPadNew.ini", &gcpad_ini(&spec.pipe_ports, spec.human.as_ref()))?;
        if spec.boot_to_css {
            write("GameSettings/GALE01.ini", MELEE_GAME_SETTINGS)?;
        }
        if let Some(watch) = &spec.memory_watcher {
            let p = root.join("MemoryWatcher");
            std::fs::create_dir_all(&p).map_err(io_err(&p, "creating"))?;
            write("MemoryWatcher/Locations.txt", &(watch.join("\n") + "\n"))?;
        }
        let mut pipes = vec![];
        for &port in &spec.pipe_ports {
            let pipe = root.join("Pipes").join(pipe_name(port));
            match std::fs::remove_file(&pipe) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&pipe, "removing the old FIFO")(e)),
            }
            super::sys::mkfifo(&pipe).map_err(io_err(&pipe, "creating the FIFO"))?;
            pipes.push(pipe);
        }
        Ok(UserDir { root: root.to_path_buf(), pipes, log: root.join("dolphin.log"), watcher_socket })
    }
}

/// A short default folder for instance `n` of this process: `/tmp/shine-d/<pid>-<n>`.
pub fn default_root(n: usize) -> PathBuf {
    std::env::temp_dir().join("shine-d").join(format!("{}-{n}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn spec() -> UserDirSpec {
        UserDirSpec {
            pipe_ports: vec![1, 0],
            speed: Speed::Unlimited,
            display: Display::Headless,
            memory_watcher: Some(vec!["80479D60".into()]),
            boot_to_css: true,
            human: None,
        }
    }

    #[test]
    fn folder_has_every_file_dolphin_reads() {
        let dir = tempfile::tempdir().unwrap();
        let u = UserDir::create(dir.path(), &spec()).unwrap();
        let ini = std::fs::read_to_string(dir.path().join("Config/Dolphin.ini")).unwrap();
        for line in [
            "CPUCore = 1",
            "Fastmem = True",
            "DSPHLE = True",
            "EnableCheats = True",
            "SIDevice0 = 6",
            "SIDevice1 = 6",
            "SIDevice2 = 0",
            "SlotA = 255",
            "SlotB = 255",
            "EmulationSpeed = 0.0",
            "Backend = No Audio Output",
            "GFXBackend = Null",
            "BackgroundInput = True",
        ] {
            assert!(ini.lines().any(|l| l == line), "Dolphin.ini lacks {line:?}:\n{ini}");
        }
        let pad = std::fs::read_to_string(dir.path().join("Config/GCPadNew.ini")).unwrap();
        assert!(pad.starts_with("[GCPad2]\nDevice = Pipe/0/bot2\n"), "{pad}");
        assert!(pad.contains("\n[GCPad1]\nDevice = Pipe/0/bot1\n"), "the CPU's port has its own pipe:\n{pad}");
        assert_eq!(pad.matches("Triggers/L-Analog = `Axis L +`").count(), 2);
        assert!(pad.contains("Main Stick/Down = `Axis MAIN Y -`"));
        assert_eq!(u.pipes, [dir.path().join("Pipes/bot2"), dir.path().join("Pipes/bot1")]);
        for p in &u.pipes {
            assert!(std::fs::metadata(p).unwrap().file_type().is_fifo());
        }
        assert!(std::fs::read_to_string(dir.path().join("GameSettings/GALE01.ini")).unwrap().contains("$Netplay Community Settings"));
        assert_eq!(std::fs::read_to_string(dir.path().join("MemoryWatcher/Locations.txt")).unwrap(), "80479D60\n");
        // Reusing the folder replaces the FIFO instead of failing.
        UserDir::create(dir.path(), &UserDirSpec { speed: Speed::RealTime, ..spec() }).unwrap();
        assert!(std::fs::read_to_string(dir.path().join("Config/Dolphin.ini")).unwrap().contains("EmulationSpeed = 1.0"));
    }

    #[test]
    fn a_persons_port_gets_their_controller_and_no_pipe() {
        let dir = tempfile::tempdir().unwrap();
        // The adapter: SIDevice 12 on their port, nothing in GCPadNew.ini for it.
        let s = UserDirSpec { pipe_ports: vec![1], human: Some((0, HumanPad::Adapter)), display: Display::Window, ..spec() };
        let u = UserDir::create(dir.path(), &s).unwrap();
        let ini = std::fs::read_to_string(dir.path().join("Config/Dolphin.ini")).unwrap();
        assert!(ini.contains("SIDevice0 = 12\n") && ini.contains("SIDevice1 = 6\n"), "{ini}");
        // A person sees and hears the game.
        assert!(ini.contains("GFXBackend = OGL\n") && !ini.contains("No Audio Output"), "{ini}");
        let pad = std::fs::read_to_string(dir.path().join("Config/GCPadNew.ini")).unwrap();
        assert!(!pad.contains("[GCPad1]") && pad.contains("[GCPad2]\nDevice = Pipe/0/bot2"), "{pad}");
        assert_eq!(u.pipes, [dir.path().join("Pipes/bot2")]);
        // A pad mapped by a Dolphin profile, its device string replaced.
        let profile = "[Profile]\nDevice = evdev/0/Some Pad\nButtons/A = `SOUTH`\nMain Stick/Up = `Axis 1-`\n";
        let mapped = HumanPad::from_profile(profile, Some("evdev/0/Xbox Wireless Controller")).unwrap();
        let s = UserDirSpec { pipe_ports: vec![0], human: Some((3, mapped)), ..spec() };
        UserDir::create(dir.path(), &s).unwrap();
        let ini = std::fs::read_to_string(dir.path().join("Config/Dolphin.ini")).unwrap();
        assert!(ini.contains("SIDevice3 = 6\n") && ini.contains("SIDevice1 = 0\n"), "{ini}");
        let pad = std::fs::read_to_string(dir.path().join("Config/GCPadNew.ini")).unwrap();
        assert!(pad.contains("[GCPad4]\nDevice = evdev/0/Xbox Wireless Controller\nButtons/A = `SOUTH`\nMain Stick/Up = `Axis 1-`\n"), "{pad}");
        // A person's port cannot also be a pipe; a profile without mappings is refused.
        let clash = UserDirSpec { pipe_ports: vec![0], human: Some((0, HumanPad::Adapter)), ..spec() };
        assert!(UserDir::create(dir.path(), &clash).unwrap_err().to_string().contains("both a person's and a pipe"));
        assert!(HumanPad::from_profile("[Profile]\nDevice = x\n", None).unwrap_err().contains("Save"));
        assert!(HumanPad::from_profile("[Profile]\nButtons/A = `A`\n", None).unwrap_err().contains("Device"));
    }

    #[test]
    fn socket_path_limit_is_enforced() {
        let long = std::env::temp_dir().join("x".repeat(100));
        let err = UserDir::create(&long, &spec()).unwrap_err();
        assert!(matches!(err, DolphinError::PathTooLong { max: 107, .. }), "{err}");
        assert!(err.to_string().contains("shorter"), "{err}");
        assert!(!long.exists(), "nothing is created when the path is refused");
        assert!(default_root(3).as_os_str().len() + "/MemoryWatcher/MemoryWatcher".len() <= MAX_SOCKET_PATH);
    }
}
