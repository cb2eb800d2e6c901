//! `shine-worker doctor`: checks a user's Dolphin setup, one line per check, and says
//! what to fix. Exits non-zero when a check fails.
//!
//! Checks, in order (each later one needs the earlier ones):
//! 1. Dolphin: `dolphin-emu-nogui` found (or `--dolphin PATH`), and its version.
//! 2. The image (`--iso`): exists, and its game id is GALE01 (Melee NTSC), revision 2 (1.02).
//! 3. Menus (a Melee 1.02 image, without `--exec`): Dolphin boots the disc and the menus
//!    are walked once into a match, printing each step with what RAM said when it
//!    began. A walk that reaches the match proves boot, RAM, frames and pipes, so the
//!    probe checks are skipped; one that fails is followed by them, which tells
//!    emulator problems from game problems.
//! 4. Boot: Dolphin boots headless a program (`--exec FILE`, or the built-in probe built
//!    with gcc-powerpc-linux-gnu), guest RAM is found and mapped, frames tick.
//! 5. Pipe (the built-in probe only): a pad sent down the pipe shows up in guest RAM.
//!
//! `--exec FILE --peek ADDR` prints the big-endian u32 at ADDR a few times, so a user
//! can watch live guest memory.

use anyhow::{bail, Context};
use clap::Args;
use shine_bridge::dolphin::{self, probe, Dolphin, DolphinConfig, Speed};
use shine_bridge::{Button, Emulator, MatchSetup, Pad};
use std::path::PathBuf;
use std::time::Duration;

/// How long `--peek` waits for its address to become non-zero before printing.
const PEEK_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// The dolphin-emu-nogui to check (default: found on PATH or in /usr/games).
    #[arg(long)]
    pub dolphin: Option<PathBuf>,
    /// Your Melee image: its game id is checked, then Dolphin boots it and walks the
    /// menus once into a match, printing what it saw in RAM at each step.
    #[arg(long)]
    pub iso: Option<PathBuf>,
    /// Boot this program (a .dol or .elf) instead of the built-in probe.
    #[arg(long)]
    pub exec: Option<PathBuf>,
    /// With --exec: print the big-endian u32 at this guest address (hex, e.g. 0x80400000) five times,
    /// after waiting up to 5 s for it to become non-zero.
    #[arg(long, value_parser = parse_addr, requires = "exec")]
    pub peek: Option<u32>,
    /// Seconds to wait for Dolphin to boot.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

fn parse_addr(s: &str) -> Result<u32, String> {
    let a = u32::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).map_err(|_| format!("{s:?} is not a hex address"))?;
    if !shine_bridge::ram::is_mem1_pointer(a) {
        return Err(format!("{a:#010x} is outside MEM1 (0x80000000..0x81800000)"));
    }
    Ok(a)
}

struct Report {
    failed: usize,
}

impl Report {
    fn ok(&self, what: &str, detail: impl std::fmt::Display) {
        println!("ok    {what}: {detail}");
    }
    fn fail(&mut self, what: &str, detail: impl std::fmt::Display, fix: impl std::fmt::Display) {
        self.failed += 1;
        println!("FAIL  {what}: {detail}\n      fix: {fix}");
    }
    fn skip(&self, what: &str, why: impl std::fmt::Display) {
        println!("skip  {what}: {why}");
    }
}

pub fn doctor(args: DoctorArgs) -> anyhow::Result<()> {
    let mut r = Report { failed: 0 };
    let exe = match dolphin::process::find_executable(args.dolphin.as_deref()) {
        Ok(exe) => {
            let version = dolphin::process::version(&exe).unwrap_or_else(|e| format!("version unknown ({e})"));
            r.ok("dolphin", format!("{} ({version})", exe.display()));
            Some(exe)
        }
        Err(dolphin::DolphinError::NotInstalled { searched }) => {
            let looked = searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            r.fail("dolphin", format!("dolphin-emu-nogui not found (looked for {looked})"), dolphin::process::INSTALL_HINT);
            None
        }
        Err(e) => {
            r.fail("dolphin", e, dolphin::process::INSTALL_HINT);
            None
        }
    };
    let melee = match &args.iso {
        Some(iso) => check_image(&mut r, iso),
        None => {
            r.skip("image", "no --iso given (needed for `play --backend dolphin`)");
            false
        }
    };
    match (&exe, &args.iso) {
        (None, _) => r.skip("menus, boot, RAM mapping, pipe", "Dolphin is missing"),
        (Some(exe), Some(iso)) if melee && args.exec.is_none() => {
            if check_menus(&mut r, exe, iso, &args)? {
                r.skip("boot, frames, pipe", "the menus walk with your disc proved them");
            } else {
                check_boot(&mut r, exe, &args)?;
            }
        }
        (Some(exe), _) => check_boot(&mut r, exe, &args)?,
    }
    if r.failed > 0 {
        bail!("{} check(s) failed; see the fixes above", r.failed);
    }
    println!("all checks passed");
    Ok(())
}

/// Whether the image is Melee NTSC 1.02.
fn check_image(r: &mut Report, iso: &std::path::Path) -> bool {
    match dolphin::image_game_id(iso) {
        Err(e) => r.fail("image", format!("{}: {e}", iso.display()), "pass the path of your Melee NTSC 1.02 disc image"),
        Ok(None) => r.fail(
            "image",
            format!("{} is not a plain GameCube disc image (compressed .rvz/.ciso images are not checked)", iso.display()),
            "use an uncompressed .iso of Melee NTSC 1.02",
        ),
        Ok(Some(id)) if id == dolphin::MELEE_GAME_ID => {
            let rev = std::fs::read(iso).ok().and_then(|b| b.get(7).copied());
            match rev {
                Some(2) => {
                    r.ok("image", format!("{id}, revision 2: Melee NTSC 1.02"));
                    return true;
                }
                other => r.fail(
                    "image",
                    format!("{id}, revision {other:?}: Melee NTSC, but not 1.02"),
                    "Shine's RAM addresses are those of NTSC 1.02; use that revision",
                ),
            }
        }
        Ok(Some(id)) => r.fail("image", format!("game id {id} is not Melee NTSC ({})", dolphin::MELEE_GAME_ID), "use Melee NTSC 1.02"),
    }
    false
}

/// Boot the disc and walk the menus once into a match (the paper's setup: Fox on port
/// 2 against Marth at level 9 on port 1, Final Destination), printing every step.
/// Returns whether the match was reached.
fn check_menus(r: &mut Report, exe: &std::path::Path, iso: &std::path::Path, args: &DoctorArgs) -> anyhow::Result<bool> {
    let work = tempfile::Builder::new().prefix("shd").tempdir_in("/tmp").context("creating a temporary folder")?;
    let setup = MatchSetup::default();
    let mut cfg = DolphinConfig::melee(iso, setup);
    cfg.executable = Some(exe.to_path_buf());
    cfg.user_dir = Some(work.path().join("u"));
    // Real time: the walk is a diagnosis, and a free-running Dolphin at full speed
    // runs several menu frames per decision.
    cfg.speed = Speed::RealTime;
    cfg.boot_timeout = Duration::from_secs(args.timeout);
    let dolphin::Game::Melee(goal) = cfg.game.clone() else { unreachable!("DolphinConfig::melee") };
    println!(
        "      menus: booting {} and walking to a match ({} on port {} against {} level {} on port {})",
        iso.display(),
        goal.agent_character,
        goal.agent_port + 1,
        goal.cpu_character,
        goal.cpu_level,
        goal.opponent_port + 1
    );
    let walked = Dolphin::launch(cfg).and_then(|mut d| {
        let frames = d.navigate(goal, &mut |t| match t.task {
            Some(task) => println!("      {:>6}  {task}: {}", t.frame, t.said()),
            None => println!("      {:>6}  in the match: {}", t.frame, t.said()),
        })?;
        Ok((d, frames))
    });
    match walked {
        Ok((_, frames)) => {
            r.ok(
                "menus",
                format!("reached the match after {frames} frames: {} against {} at level {}", goal.agent_character, goal.cpu_character, goal.cpu_level),
            );
            Ok(true)
        }
        Err(e) => {
            // Keep Dolphin's log for the report.
            let kept = work.keep();
            r.fail(
                "menus",
                e,
                format!(
                    "send this whole output and Dolphin's log ({}) with your report (docs/dolphin.md, \"If the menus fail\")",
                    kept.join("u/dolphin.log").display()
                ),
            );
            Ok(false)
        }
    }
}

fn check_boot(r: &mut Report, exe: &std::path::Path, args: &DoctorArgs) -> anyhow::Result<()> {
    let work = tempfile::Builder::new().prefix("shd").tempdir_in("/tmp").context("creating a temporary folder")?;
    let (program, builtin) = match &args.exec {
        Some(p) => (p.clone(), false),
        None => match probe::build(&work.path().join("probe")) {
            Ok(p) => (p, true),
            Err(e) => {
                r.fail("boot", format!("cannot build the built-in probe: {e}"), "install gcc-powerpc-linux-gnu, or pass a GameCube program with --exec FILE");
                return Ok(());
            }
        },
    };
    let mut cfg = DolphinConfig::homebrew(&program);
    cfg.executable = Some(exe.to_path_buf());
    cfg.user_dir = Some(work.path().join("u"));
    cfg.speed = Speed::RealTime;
    cfg.boot_timeout = Duration::from_secs(args.timeout);
    cfg.require_ticks = builtin;
    let mut d = match Dolphin::launch(cfg) {
        Ok(d) => d,
        Err(e) => {
            r.fail("boot", e, "see Dolphin's log above; `shine-worker doctor` with the built-in probe separates emulator problems from image problems");
            return Ok(());
        }
    };
    r.ok("boot", format!("Dolphin (pid {}) booted {} headless; guest RAM mapped from /dev/shm/dolphin-emu.{}", d.pid(), program.display(), d.pid()));
    if let Some(a) = args.peek {
        // RAM is mapped as soon as Dolphin allocates it, before the guest's first
        // instruction (zeroed): give the program a few seconds to write there first,
        // which on a loaded machine can take more than a moment.
        let started = std::time::Instant::now();
        while d.ram().u32(a).is_ok_and(|v| v == 0) && started.elapsed() < PEEK_WAIT {
            std::thread::sleep(Duration::from_millis(50));
        }
        for i in 0..5 {
            match d.ram().u32(a) {
                Ok(v) => println!("      peek {a:#010x} = {v:#010x}"),
                Err(e) => println!("      peek {a:#010x}: {e}"),
            }
            if i < 4 {
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
    if !builtin {
        r.skip("frames, pipe", "only checked with the built-in probe (omit --exec)");
        return Ok(());
    }
    let f0 = d.frame();
    let ticked = (0..30).try_for_each(|_| d.step(&Pad::NEUTRAL));
    match ticked {
        Ok(()) => r.ok("frames", format!("frame counter {} -> {}, {} skipped", f0, d.frame(), d.skipped_frames())),
        Err(e) => {
            r.fail("frames", e, "Dolphin runs but the probe's frames do not tick: check its log");
            return Ok(());
        }
    }
    let pad = Pad::NEUTRAL.with(Button::A).with_main(1.0, 0.5);
    let mut seen = None;
    for _ in 0..60 {
        d.step(&pad)?;
        let s = probe::read(d.ram())?;
        if s.pad.buttons & 0x0100 != 0 && s.pad.main.0 >= 0xF0 {
            seen = Some(s);
            break;
        }
    }
    match seen {
        Some(s) => r.ok(
            "pipe",
            format!("A + stick right sent down {} reached the guest (SI words {:08x} {:08x})", d.user_dir().join("Pipes").display(), s.raw.0, s.raw.1),
        ),
        None => r.fail(
            "pipe",
            "a pad sent down the pipe never reached the guest",
            "check Config/GCPadNew.ini maps the port to Pipe/0/<name>, and that SIDevice is 6 (standard controller)",
        ),
    }
    Ok(())
}
