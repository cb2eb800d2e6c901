//! The Dolphin backend end to end against `shine-dolphin-peer`, a process that behaves
//! as Dolphin does at its boundary (FIFO, shared-memory segment found through
//! /proc/PID/fd, frame counter) and plays Melee with the embedded simulator. The real
//! code path runs unchanged: launch, user folder, /proc scan, mmap, pipe, tick, menus.

use rand::{Rng, SeedableRng};
use shine_bridge::dolphin::menu::{MenuGoal, Opponent, Task};
use shine_bridge::dolphin::{css, Dolphin, DolphinConfig, DolphinError, HumanPad, Interrupt, TickSource};
use shine_bridge::melee::characters::{self, Character};
use shine_bridge::ram::{addr, fighter, pad_block, pad_block_addr, static_block, static_player, SIM_WINDOW};
use shine_bridge::sim::Sim;
use shine_bridge::{Button, Emulator, MatchSetup, Pad, RamView, Stick};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const PEER: &str = env!("CARGO_BIN_EXE_shine-dolphin-peer");

use shine_testkit::HANG;

struct Case {
    _tmp: tempfile::TempDir,
    cfg: DolphinConfig,
}

/// A scenario file and a config pointing the backend at the peer.
fn case(name: &str, scenario: &str, setup: MatchSetup) -> Case {
    let tmp = tempfile::Builder::new().prefix("shp").tempdir_in("/tmp").unwrap();
    let image = tmp.path().join(format!("{name}.scenario"));
    std::fs::write(&image, scenario).unwrap();
    let mut cfg = DolphinConfig::melee(&image, setup);
    cfg.executable = Some(PathBuf::from(PEER));
    cfg.user_dir = Some(tmp.path().join("u"));
    // Generous: a boot or a frame that takes long on a loaded machine is still waited
    // for. (The tests of these timeouts set their own.)
    cfg.boot_timeout = HANG;
    cfg.frame_timeout = Duration::from_secs(60);
    Case { _tmp: tmp, cfg }
}

/// Bytes of the simulator's window that the peer may legitimately write differently:
/// the frame counter (the peer's own, monotonic, like Melee's), the scene bytes (the
/// peer also sets the major scene), the pad block Melee fills from the controller, the
/// characters' ids (the ones chosen on the menus; `fighters` checks them) and who plays
/// each port (the slot types set on the menus, which the navigator checks).
fn masked(view: RamView, agent_port: usize) -> Vec<u8> {
    let w = SIM_WINDOW;
    let mut out = match view.base() {
        b if b == w.start => view.bytes().to_vec(),
        _ => view.bytes()[(w.start - addr::MEM1_BASE) as usize..(w.end - addr::MEM1_BASE) as usize].to_vec(),
    };
    let pb = pad_block_addr(agent_port);
    // The CPU levels Melee keeps from the character-select screen.
    let levels = (0..4).map(|p| (css::level_addr(p), 1u32));
    let ids = (0..4).flat_map(|p| {
        let e = view.u32(static_block(p) + static_player::FIGHTER_PTR).unwrap_or(0);
        let e = (w.start..w.end).contains(&e).then_some((e + fighter::INTERNAL_CHARACTER, 4u32));
        [Some((static_block(p) + static_player::CHARACTER, 4u32)), Some((static_block(p) + static_player::SLOT_TYPE, 4u32)), e].into_iter().flatten()
    });
    for (a, n) in [(addr::FRAME_COUNTER, 4u32), (addr::SCENE, 4), (pb, 0x38)].into_iter().chain(levels).chain(ids) {
        let o = (a - w.start) as usize;
        out[o..o + n as usize].fill(0);
    }
    out
}

/// Where two RAM windows first differ, for a readable failure (not a 0x8D000-byte dump).
fn first_difference(a: &[u8], b: &[u8]) -> Option<String> {
    let i = a.iter().zip(b).position(|(x, y)| x != y)?;
    Some(format!("first difference at {:#010x}: {} vs {}", SIM_WINDOW.start as usize + i, a[i], b[i]))
}

fn random_pad(rng: &mut rand_chacha::ChaCha8Rng) -> Pad {
    let mut p = Pad::NEUTRAL;
    // Never the quit combination by accident: no START.
    for b in [Button::A, Button::B, Button::X, Button::L, Button::Z] {
        if rng.random_bool(0.15) {
            p.set(b, true);
        }
    }
    p.main = Stick::new(rng.random_range(0.0..=1.0), rng.random_range(0.0..=1.0));
    p
}

/// Play `frames` random pads on both the backend and a reference simulator; every
/// frame, the RAM the worker reads through Dolphin's code path equals the simulator's.
fn play_and_compare(d: &mut Dolphin, reference: &mut Sim, frames: usize, rng: &mut rand_chacha::ChaCha8Rng) {
    let port = d.setup().agent_port;
    if let Some(diff) = first_difference(&masked(d.ram(), port), &masked(reference.ram(), port)) {
        panic!("state right after reset: {diff}");
    }
    for f in 0..frames {
        let pad = random_pad(rng);
        d.step(&pad).unwrap();
        reference.step(&pad).unwrap();
        if let Some(diff) = first_difference(&masked(d.ram(), port), &masked(reference.ram(), port)) {
            panic!("frame {f}: RAM differs from the simulator's: {diff}");
        }
        // The peer also filled Melee's pad block from what it parsed off the pipe.
        let pb = pad_block_addr(port);
        assert_eq!(d.ram().u32(pb + pad_block::BUTTONS).unwrap(), pad.melee_buttons());
        assert_eq!(d.ram().f32(pb + pad_block::MAIN_X).unwrap(), pad.main.to_melee().0);
    }
}

#[test]
fn episodes_through_the_dolphin_code_path_equal_the_simulator() {
    let setup = MatchSetup { cpu_level: 7, ..MatchSetup::default() };
    let c = case("sim", "seed = 40\n", setup);
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    // /proc shows the segment exactly as for Dolphin.
    let link = shine_bridge::dolphin::guest::scan_fd_dir(&PathBuf::from(format!("/proc/{}/fd", d.pid()))).unwrap().unwrap();
    assert_eq!(link.target, format!("/dev/shm/dolphin-emu.{} (deleted)", d.pid()));

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for episode in 0..3u64 {
        d.reset(setup, 0).unwrap();
        let mut reference = Sim::new(setup, 40 + episode);
        play_and_compare(&mut d, &mut reference, 400, &mut rng);
    }
    // Lock-step: every frame had our pad; three matches on one launch.
    assert_eq!(d.skipped_frames(), 0);
    assert_eq!(d.stats().launches, 1);
    // The later resets went through the menus (quit, character select): more ticks than
    // the 1200 played frames.
    assert!(d.stats().ticks > 3 * 400 + 20, "{:?}", d.stats());
}

#[test]
fn memory_watcher_tick_gives_the_same_states() {
    let setup = MatchSetup::default();
    let mut c = case("mw", "seed = 3\n", setup);
    c.cfg.tick = TickSource::MemoryWatcher;
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert!(d.user_dir().join("MemoryWatcher/Locations.txt").exists());
    d.reset(setup, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    play_and_compare(&mut d, &mut Sim::new(setup, 3), 200, &mut rng);
    assert_eq!(d.skipped_frames(), 0);
}

#[test]
fn a_free_running_emulator_skips_frames_and_they_are_counted() {
    // Upstream Dolphin does not wait for input: at 500 frames/s and a bot that takes
    // 10 ms a frame, most frames run on the previous pad. Slow steps until 20 skipped
    // frames are counted (a count, however fast this machine plays them).
    let setup = MatchSetup::default();
    let c = case("free", "pace = free\nfps = 500\n", setup);
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    d.reset(setup, 0).unwrap();
    let (before, started) = (d.skipped_frames(), Instant::now());
    while d.skipped_frames() - before < 20 {
        assert!(started.elapsed() < HANG, "slow steps at 500 fps skip frames: counted {}", d.skipped_frames() - before);
        std::thread::sleep(Duration::from_millis(10));
        d.step(&Pad::NEUTRAL).unwrap();
    }
    assert_eq!(d.stats().skipped, d.skipped_frames());
}

#[test]
fn a_free_running_emulator_ticked_by_memory_watcher_moves_on_every_step() {
    // Datagrams of the frames that ran while the bot thought are drained before its
    // pad goes out; each step must then wait for a newer frame, never settle for one
    // it had already seen.
    let setup = MatchSetup::default();
    let mut c = case("freemw", "pace = free\nfps = 60\n", setup);
    c.cfg.tick = TickSource::MemoryWatcher;
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    d.reset(setup, 0).unwrap();
    // At least 20 steps, and on until 20 skipped frames are counted (a count, however
    // fast this machine plays them).
    let (before, mut last, started) = (d.skipped_frames(), d.frame(), Instant::now());
    let mut step = 0;
    while step < 20 || d.skipped_frames() - before < 20 {
        assert!(started.elapsed() < HANG, "slow steps skip frames: {:?}", d.stats());
        std::thread::sleep(Duration::from_millis(40)); // two to three frames at 60 fps
        d.step(&Pad::NEUTRAL).unwrap();
        assert!(d.frame() > last, "step {step}: frame {} after {last}", d.frame());
        last = d.frame();
        step += 1;
    }
}

#[test]
fn a_crashed_emulator_is_reported_and_restarted_by_reset() {
    let setup = MatchSetup::default();
    let mut c = case("crash", "crash_after = 60\n", setup);
    // A crash may show as a frame that never comes: reported after this long.
    c.cfg.frame_timeout = Duration::from_secs(5);
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    d.reset(setup, 0).unwrap();
    let first_pid = d.pid();
    let err = (0..200).find_map(|_| d.step(&Pad::NEUTRAL).err()).expect("the peer aborts after 60 frames");
    let msg = err.to_string();
    assert!(matches!(err, DolphinError::Died { .. } | DolphinError::Pipe(_) | DolphinError::NoFrames { .. }), "{msg}");
    d.reset(setup, 0).expect("reset restarts a dead emulator");
    assert_ne!(d.pid(), first_pid);
    assert_eq!(d.stats().launches, 2);
    d.step(&Pad::NEUTRAL).unwrap();
}

#[test]
fn start_up_failures_are_clear_errors() {
    let setup = MatchSetup::default();
    // Exits at once: "exited early", with its log.
    let c = case("exit", "exit_at_start = 7\n", setup);
    let err = Dolphin::launch(c.cfg.clone()).err().unwrap();
    let msg = err.to_string();
    assert!(matches!(err, DolphinError::ExitedEarly { .. }), "{msg}");
    assert!(msg.contains("exit status: 7") && msg.contains("exiting at start"), "the log tail is in the error: {msg}");

    // Runs but never exposes RAM: "RAM not found" within the timeout.
    let mut c = case("noram", "no_ram = true\n", setup);
    c.cfg.boot_timeout = Duration::from_millis(800);
    let err = Dolphin::launch(c.cfg.clone()).err().unwrap();
    assert!(matches!(err, DolphinError::RamNotFound { .. }), "{err}");
    assert!(err.to_string().contains("dolphin-emu."), "{err}");

    // RAM but no frames. (Long enough for a loaded machine to start the peer and map
    // its RAM, so that the frames are what times out: the test waits that long for them.)
    let mut c = case("noframes", "no_frames = true\n", setup);
    c.cfg.boot_timeout = Duration::from_secs(20);
    let err = Dolphin::launch(c.cfg.clone()).err().unwrap();
    assert!(matches!(err, DolphinError::NoFrames { .. }), "{err}");

    // Not a Dolphin at all, and no image.
    let mut c = case("missing", "", setup);
    c.cfg.executable = Some("/nonexistent/dolphin-emu-nogui".into());
    assert!(matches!(Dolphin::launch(c.cfg.clone()), Err(DolphinError::NotInstalled { .. })));
    c.cfg.executable = Some(PEER.into());
    c.cfg.image = "/nonexistent/melee.iso".into();
    assert!(matches!(Dolphin::launch(c.cfg), Err(DolphinError::ImageMissing(_))));
}

/// The in-game characters (internal ids) of the bot's and the CPU's ports.
fn fighters(d: &Dolphin, setup: MatchSetup) -> (Option<Character>, Option<Character>) {
    let id = |p: usize| d.ram().player(p).unwrap().fighter().unwrap().map(|f| f.internal_character().unwrap()).and_then(Character::by_internal);
    (id(setup.agent_port), id(setup.opponent_port))
}

#[test]
fn the_menus_are_walked_from_the_title_screen_to_fox_against_marth_at_the_level_asked() {
    // The disc boots to the title screen; the CPU's slider starts at 2.
    let setup = MatchSetup { cpu_level: 9, ..MatchSetup::default() };
    let c = case("menus", "seed = 5\nboot_to = title\ncpu_level_start = 2\n", setup);
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    let goal = MenuGoal { agent_port: setup.agent_port, opponent_port: setup.opponent_port, cpu_level: 9, ..MenuGoal::default() };
    let (mut steps, mut coin) = (vec![], None);
    d.navigate(goal, &mut |t| {
        steps.push(t.task);
        if t.task == Some(Task::Start) {
            // Every coin is down: the bot's hand struct says so at +5; its byte at +2,
            // where the old code looked, does not.
            let hand = t.ram.u32(css::hand_ptr_addr(setup.agent_port)).unwrap();
            coin = Some((t.ram.u8(hand + css::HAND_STATE).unwrap(), t.ram.u8(hand + 2).unwrap()));
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let at = |task| steps.iter().position(|s| *s == Some(task)).unwrap_or_else(|| panic!("{task:?} never began: {steps:?}"));
    assert!(at(Task::TitleScreen) < at(Task::MainMenu) && at(Task::MainMenu) < at(Task::AgentCoin), "{steps:?}");
    assert!(at(Task::AgentCoin) < at(Task::Start) && at(Task::Start) < at(Task::StageSelect), "{steps:?}");
    assert_eq!(steps.last(), Some(&None), "the walk ends in a match");
    // At START the bot's hand is an open hand over the grid (2 at +5, the
    // decompilation's value); +2 of the struct is not the state.
    let (state, at_plus_2) = coin.expect("START was reached");
    assert_eq!(state, css::HandState::OverGrid.byte());
    assert_ne!(at_plus_2, css::HandState::OverGrid.byte());
    // In game: Fox (internal 0x01) for the bot, Marth (0x12) for the CPU, level 9.
    assert_eq!(fighters(&d, setup), (Some(characters::FOX), Some(characters::MARTH)));
    assert_eq!(d.ram().u8(css::level_addr(setup.opponent_port)).unwrap(), 9);
}

#[test]
fn a_missed_pause_is_retried_and_the_next_match_gets_the_new_level() {
    let first = MatchSetup { cpu_level: 9, ..MatchSetup::default() };
    let c = case("pause", "seed = 20\nmissed_pauses = 2\n", first);
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    d.reset(first, 0).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    play_and_compare(&mut d, &mut Sim::new(first, 20), 60, &mut rng);
    // The quit's first two pauses are missed; it presses again until the match is gone.
    let second = MatchSetup { cpu_level: 3, ..first };
    d.reset(second, 0).unwrap_or_else(|e| panic!("{e}"));
    let log = std::fs::read_to_string(d.log_path()).unwrap();
    assert_eq!(log.matches("missing this pause").count(), 2, "{log}");
    assert_eq!(d.ram().u8(css::level_addr(second.opponent_port)).unwrap(), 3, "the slider was dragged down to 3");
    assert_eq!(fighters(&d, second), (Some(characters::FOX), Some(characters::MARTH)));
    // The match runs at level 3: it equals the simulator's at level 3.
    play_and_compare(&mut d, &mut Sim::new(second, 21), 200, &mut rng);
}

#[test]
fn the_cpu_hand_lets_go_of_the_level_slider_from_below_and_from_above() {
    // Regression: holding the slider reads 1 in the hand's state byte, as a coin in
    // hand does (the decompilation, which the peer follows). The old navigator took the
    // held slider for the coin and steered toward Marth, dragging the level to 9 and
    // never letting go, so any level other than 9 (here 4 from 1, then 2 from 9) hung
    // at "the CPU port's hand placing its coin".
    for (start, want) in [(1u8, 4u8), (9, 2)] {
        let setup = MatchSetup { cpu_level: want, ..MatchSetup::default() };
        let c = case("slider", &format!("seed = 8\ncpu_level_start = {start}\n"), setup);
        let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
        let mut steps = vec![];
        let goal = MenuGoal { agent_port: 1, opponent_port: 0, cpu_level: want, ..MenuGoal::default() };
        d.navigate(goal, &mut |t| steps.push(t.task)).unwrap_or_else(|e| panic!("from {start} to {want}: {e}"));
        assert!(steps.contains(&Some(Task::CpuLevel)), "{steps:?}");
        assert_eq!(d.ram().u8(css::level_addr(0)).unwrap(), want);
        assert_eq!(fighters(&d, setup), (Some(characters::FOX), Some(characters::MARTH)));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        play_and_compare(&mut d, &mut Sim::new(setup, 8), 60, &mut rng);
    }
}

#[test]
fn the_bots_own_port_left_on_cpu_or_off_is_switched_back_to_human() {
    // Regression: with the bot's port a CPU, Melee's CPU played as "the bot" and nothing
    // said so (the peer plays such a port with the simulator's CPU, as Melee would; the
    // pads the bot sends then do not match the game's).
    for (kind, name) in [("cpu", "bot port on CPU"), ("off", "bot port off")] {
        let setup = MatchSetup::default();
        let c = case("botslot", &format!("seed = 9\nslot_2 = {kind}\n"), setup);
        let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
        let mut steps = vec![];
        d.navigate(MenuGoal::default(), &mut |t| steps.push(t.task)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let log = std::fs::read_to_string(d.log_path()).unwrap();
        assert!(!log.contains("is a CPU"), "{name}: the bot's port must be human when the match starts:\n{log}");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
        play_and_compare(&mut d, &mut Sim::new(setup, 9), 120, &mut rng);
        if kind == "cpu" {
            assert!(steps.contains(&Some(Task::AgentToggle)), "{name}: {steps:?}");
        }
    }
}

#[test]
fn a_stage_load_longer_than_the_frame_timeout_is_waited_for() {
    // Regression: Melee's frame counter stands still while the stage loads (seconds at
    // real time); with one timeout for menus and play, a load longer than it read as
    // "the frame counter did not move".
    // The load (6 s) is longer than the frame timeout (5 s, the backend's default, also
    // ample for the frames of play on a loaded machine); the load timeout only a hang
    // reaches.
    let setup = MatchSetup::default();
    let mut c = case("load", "seed = 12\nstage_load_ms = 6000\n", setup);
    c.cfg.frame_timeout = Duration::from_secs(5);
    c.cfg.load_timeout = HANG;
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    d.reset(setup, 0).unwrap_or_else(|e| panic!("{e}"));
    let log = std::fs::read_to_string(d.log_path()).unwrap();
    assert!(log.contains("loading the stage"), "{log}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    play_and_compare(&mut d, &mut Sim::new(setup, 12), 60, &mut rng);
    // In play the short timeout still holds: a Dolphin that stops is reported quickly.
    let mut c = case("load2", "seed = 12\nstage_load_ms = 2500\n", setup);
    c.cfg.frame_timeout = Duration::from_secs(1);
    c.cfg.load_timeout = Duration::from_secs(1);
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    let err = d.reset(setup, 0).unwrap_err();
    assert!(matches!(err, DolphinError::NoFrames { .. }), "a load longer than load_timeout is reported: {err}");
}

#[test]
fn against_a_person_their_port_is_their_controllers_and_the_bot_plays_whichever_port_it_has() {
    // The person's stand-in in the peer picks Luigi and plays (in the match) like the
    // simulator's CPU at level 4; the bot is on port 2, then on port 1.
    for (bot, person) in [(1usize, 0usize), (0, 1)] {
        let setup = MatchSetup { agent_port: bot, opponent_port: person, cpu_level: 4, ..MatchSetup::default() };
        let mut c = case("person", "seed = 13\nhuman_character = Luigi\nhuman_level = 4\n", setup);
        c.cfg.human_pad = Some(HumanPad::Adapter);
        if let shine_bridge::dolphin::Game::Melee(goal) = &mut c.cfg.game {
            goal.opponent = Opponent::Human;
        }
        let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
        // Only the bot has a pipe; the person's port is the adapter's.
        let pipes: Vec<String> = std::fs::read_dir(d.user_dir().join("Pipes")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(pipes, [format!("bot{}", bot + 1)], "bot on port {}", bot + 1);
        let ini = std::fs::read_to_string(d.user_dir().join("Config/Dolphin.ini")).unwrap();
        assert!(ini.contains(&format!("SIDevice{person} = 12")), "{ini}");
        d.reset(setup, 0).unwrap_or_else(|e| panic!("bot on port {}: {e}", bot + 1));
        let log = std::fs::read_to_string(d.log_path()).unwrap();
        assert!(log.contains("Fox vs Luigi"), "the stand-in placed its own coin:\n{log}");
        // The person chose Luigi; the bot is Fox.
        assert_eq!(fighters(&d, setup), (Some(characters::FOX), Some(characters::LUIGI)), "bot on port {}", bot + 1);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
        play_and_compare(&mut d, &mut Sim::new(setup, 13), 200, &mut rng);
    }
}

/// A config for a person on port 1 against the bot on port 2, with the peer's stand-in
/// for the person playing by `scenario`.
fn against_the_stand_in(name: &str, scenario: &str) -> (Case, MatchSetup) {
    let setup = MatchSetup { agent_port: 1, opponent_port: 0, cpu_level: 5, ..MatchSetup::default() };
    let mut c = case(name, scenario, setup);
    c.cfg.human_pad = Some(HumanPad::Adapter);
    if let shine_bridge::dolphin::Game::Melee(goal) = &mut c.cfg.game {
        goal.opponent = Opponent::Human;
    }
    (c, setup)
}

#[test]
fn a_person_who_takes_longer_than_the_whole_walks_frame_limit_is_waited_for() {
    // Issue 46: the frames that wait for a person do not count against
    // menu_frame_limit; the stand-in used to rest under the limit, so nothing showed
    // it. Here it rests 1,200 frames at character select with a limit of 600.
    let (mut c, setup) = against_the_stand_in("patient", "seed = 14\nhuman_wait = 1200\n");
    c.cfg.menu_frame_limit = 600;
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut steps = vec![];
    let frames = d.navigate(MenuGoal { opponent: Opponent::Human, ..MenuGoal::default() }, &mut |t| steps.push(t.task)).unwrap_or_else(|e| panic!("{e}"));
    assert!(frames > 1200, "{frames} frames: the walk outlasted its limit while it waited");
    assert!(steps.contains(&Some(Task::PersonCoin)) && steps.last() == Some(&None), "{steps:?}");
    assert_eq!(fighters(&d, setup), (Some(characters::FOX), Some(characters::LUIGI)));
}

#[test]
fn an_interrupt_ends_the_walk_between_two_frames_and_a_launch_leaves_no_folder_behind() {
    // Ctrl-C in `play --human-port` (issue 46): a walk that waits for a person never
    // ends by itself, so the interrupt is asked between frames.
    let (mut c, _) = against_the_stand_in("interrupt", "seed = 15\nhuman_wait = 100000\n");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    c.cfg.interrupt = Interrupt::new(move || flag.load(std::sync::atomic::Ordering::Relaxed));
    let mut d = Dolphin::launch(c.cfg.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut waited = 0;
    let err = d
        .navigate(MenuGoal { opponent: Opponent::Human, ..MenuGoal::default() }, &mut |t| {
            if t.task == Some(Task::PersonCoin) {
                // The person is being waited for: Ctrl-C now.
                waited += 1;
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .unwrap_err();
    assert!(matches!(err, DolphinError::Interrupted) && waited == 1, "{err}");
    assert!(matches!(d.step(&Pad::NEUTRAL), Err(DolphinError::Interrupted)));
    // Launched while interrupted: no Dolphin, and no folder of ours left (a folder given
    // in the config is the caller's).
    let mut c = case("interrupted-launch", "seed = 16\n", MatchSetup::default());
    c.cfg.user_dir = None;
    c.cfg.interrupt = Interrupt::new(|| true);
    let ours = || -> Vec<String> {
        let prefix = format!("{}-", std::process::id());
        let dir = std::env::temp_dir().join("shine-d");
        std::fs::read_dir(dir)
            .map_or(vec![], |r| r.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with(&prefix)).collect())
    };
    let before = ours();
    assert!(matches!(Dolphin::launch(c.cfg), Err(DolphinError::Interrupted)));
    assert_eq!(ours(), before, "the interrupted launch's folder is removed");
}
