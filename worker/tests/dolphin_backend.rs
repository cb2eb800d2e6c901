//! `shine-worker play` and `run` with `--backend dolphin`, and `shine-worker doctor`, as
//! a user runs them.
//!
//! The play and run tests point `--dolphin` at `shine-dolphin-peer` (bridge's stand-in
//! for Dolphin, which plays with the embedded simulator), so whole episodes go through
//! the Dolphin code path (launch, /proc scan, mmap, pipe, tick, menus): `play` must
//! come out exactly as on `--backend sim` with the same seeds, and `run` must feed a
//! real manager and survive its emulators crashing. The doctor test with Dolphin uses
//! the real emulator (see bridge/tests/real_dolphin.rs for the install policy).

mod procs;

use procs::run_worker as run;
use procs::*;
use shine_agent::actions::ActionSet;
use shine_agent::Side;

/// `play` with `common` on the simulator, then through the peer with `scenario` as the
/// image: both stdouts and the Dolphin run's stderr, each run checked to succeed.
fn on_sim_and_through_the_peer(common: &[&str], scenario: &std::path::Path) -> (String, String, String) {
    let (ok, sim_out, err) = run(common);
    assert!(ok, "{err}");
    let peer = peer();
    let mut args = common.to_vec();
    args.extend(["--backend", "dolphin", "--dolphin", peer.to_str().unwrap(), "--iso", scenario.to_str().unwrap()]);
    let (ok, dolphin_out, err) = run(&args);
    assert!(ok, "{err}");
    (sim_out, dolphin_out, err)
}

/// `play --human-port` against the peer's stand-in for a person, with `scenario` as the
/// image and an idle bot, for `matches` matches: success, stdout, stderr.
fn play_against_the_stand_in(scenario: &std::path::Path, human_port: &str, matches: &str) -> (bool, String, String) {
    run(&person_args(scenario, &["--human-port", human_port, "--policy", "idle", "--episodes", matches]))
}

/// `play --backend dolphin` with the peer as Dolphin and `scenario` as the image, then
/// `rest`.
fn person_args<'a>(scenario: &'a std::path::Path, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["play", "--backend", "dolphin", "--dolphin", peer().to_str().unwrap(), "--iso", scenario.to_str().unwrap()];
    args.extend(rest);
    args
}

/// A scenario file (the peer's "disc image") with `text`, in `dir`.
fn scenario_file(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("melee.scenario");
    std::fs::write(&path, text).unwrap();
    path
}

/// One match of `play --human-port 1` with an idle bot against the stand-in playing
/// by `scenario` (a temporary scenario file): its stdout and stderr, once it succeeded.
fn one_match_against_the_stand_in(scenario: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = play_against_the_stand_in(&scenario_file(dir.path(), scenario), "1", "1");
    assert!(ok, "{out}\n{err}");
    assert_eq!(match_lines(&out).len(), 1, "{out}");
    (out, err)
}

/// The `match` lines of a `play --human-port` output.
fn match_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("match")).collect()
}

/// The per-episode lines of a `play` output.
fn episodes(out: &str) -> Vec<String> {
    out.lines().filter(|l| l.starts_with("episode")).map(str::to_string).collect()
}

#[test]
fn play_through_the_dolphin_backend_equals_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path(), "seed = 11\n");
    let common = ["play", "--policy", "dodge", "--cpu-level", "5", "--episodes", "4", "--seed", "11"];
    let (sim_out, dolphin_out, err) = on_sim_and_through_the_peer(&common, &scenario);
    assert_eq!(episodes(&sim_out).len(), 4, "{sim_out}");
    assert_eq!(episodes(&dolphin_out), episodes(&sim_out), "same seeds, same episodes, whichever backend");
    assert!(err.contains("dolphin:") && err.contains("skipped"), "skipped frames are reported: {err}");
}

#[test]
fn a_marth_model_plays_the_opponents_port_through_its_own_pipe_as_on_the_simulator() {
    // A Fox model against a Marth model (each taking a random action 5 % of the time,
    // the default for two models): the peer's match drives Marth from the opponent
    // port's pipe, so every episode is the simulator's with the same seeds.
    let dir = tempfile::tempdir().unwrap();
    let fox = side_model_file(dir.path(), ActionSet::Fight, Side::Fox, 9);
    let marth = side_model_file(dir.path(), ActionSet::Fight, Side::Marth, 6);
    let scenario = scenario_file(dir.path(), "seed = 11\nstocks = 2\n");
    let opponent = format!("model:{marth}");
    let common = ["play", "--model", &fox, "--opponent", &opponent, "--episodes", "3", "--seed", "11"];
    let (sim_out, dolphin_out, err) = on_sim_and_through_the_peer(&common, &scenario);
    assert!(err.contains("against model v6 (marth) on the opponent's port in Dolphin"), "{err}");
    assert_eq!(episodes(&sim_out).len(), 3, "{sim_out}");
    assert_eq!(episodes(&dolphin_out), episodes(&sim_out), "same seeds, same episodes:\n{sim_out}\n{dolphin_out}");
    let last = |s: &str| s.lines().last().unwrap().to_string();
    assert!(last(&dolphin_out).contains("against model v6 (marth), epsilon 0.05: won "), "{dolphin_out}");
    // Against the CPU the same Fox plays other matches: the pipe, not Melee's CPU, played Marth.
    let (ok, cpu_out, err) = run(&["play", "--model", &fox, "--episodes", "3", "--seed", "11"]);
    assert!(ok, "{err}");
    assert_ne!(episodes(&cpu_out), episodes(&sim_out), "{cpu_out}");
    // What cannot be played there is refused before Dolphin starts.
    let iso = scenario.to_str().unwrap();
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--iso", iso, "--model", &marth, "--opponent", &format!("model:{fox}")]);
    assert!(!ok && err.contains("in Dolphin the bot plays Fox"), "{err}");
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--iso", iso, "--model", &fox, "--opponent", &format!("model:{fox}")]);
    assert!(!ok && err.contains("the opponent model") && err.contains("plays fox"), "{err}");
}

#[test]
fn play_with_dolphin_says_what_is_missing() {
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--episodes", "1"]);
    assert!(!ok);
    assert!(err.contains("--iso PATH"), "{err}");
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--iso", "/nonexistent/melee.iso", "--dolphin", "/nonexistent/dolphin-emu-nogui"]);
    assert!(!ok);
    assert!(err.contains("apt-get install dolphin-emu"), "{err}");
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--iso", "/nonexistent/melee.iso", "--dolphin", "/bin/true"]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/melee.iso does not exist"), "{err}");
}

#[test]
fn doctor_without_dolphin_prints_how_to_install_and_fails() {
    let (ok, out, err) = run(&["doctor", "--dolphin", "/nonexistent/dolphin-emu-nogui"]);
    assert!(!ok, "doctor must exit non-zero without Dolphin");
    assert!(out.contains("FAIL  dolphin") && out.contains("sudo apt-get install dolphin-emu"), "{out}");
    assert!(err.contains("check(s) failed"), "{err}");
}

#[test]
fn doctor_checks_an_image_game_id() {
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("not-melee.iso");
    std::fs::write(&iso, b"GMSE01\x00\x00rest").unwrap();
    let (ok, out, _) = run(&["doctor", "--dolphin", "/nonexistent/x", "--iso", iso.to_str().unwrap()]);
    assert!(!ok);
    assert!(out.contains("game id GMSE01 is not Melee NTSC"), "{out}");
    std::fs::write(&iso, b"GALE01\x00\x02rest").unwrap();
    let (_, out, _) = run(&["doctor", "--dolphin", "/nonexistent/x", "--iso", iso.to_str().unwrap()]);
    assert!(out.contains("ok    image: GALE01, revision 2: Melee NTSC 1.02"), "{out}");
}

#[test]
fn doctor_with_a_disc_walks_the_menus_and_prints_what_ram_said_at_each_step() {
    // docs/play-your-bot.md's `shine-worker doctor --iso ~/games/melee.iso`, and the
    // walk docs/dolphin.md shows. The peer stands in for Dolphin; its scenario file
    // starts with a Melee 1.02 disc header, so the image check passes, and it boots to
    // the title screen.
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("melee.iso");
    std::fs::write(&iso, "GALE01\x00\x02\nseed = 3\nboot_to = title\ncpu_level_start = 4\n").unwrap();
    let (ok, out, err) = run(&["doctor", "--dolphin", peer().to_str().unwrap(), "--iso", iso.to_str().unwrap()]);
    assert!(ok, "{out}\n{err}");
    let at = |needle: &str| out.find(needle).unwrap_or_else(|| panic!("missing {needle:?} in:\n{out}"));
    // Each step in the order the game meets them, with the RAM it saw.
    let order = [
        "ok    image: GALE01, revision 2",
        "title screen: pressing START: scene 0/0",
        "main menu: choosing VS mode, then Melee: scene 1/0; submenu 0, selection 0",
        "character select: the bot's hand placing its coin: scene 2/0; bot port 2: hand (",
        "CPU level 4",
        "character select: START once the ready banner shows",
        "stage select: moving to the stage, A: scene 2/1",
        "in the match: scene 2/2; bot port 2: Fox (internal 0x01)",
        "ok    menus: reached the match after",
        "skip  boot, frames, pipe: the menus walk with your disc proved them",
        "all checks passed",
    ];
    for pair in order.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{:?} before {:?} in:\n{out}", pair[0], pair[1]);
    }
    assert!(out.contains("CPU port 1: Marth (internal 0x12)"), "{out}");
}

#[test]
fn doctor_with_real_dolphin_reports_each_check_and_peeks() {
    if std::env::var_os("SHINE_SKIP_REAL_DOLPHIN").is_some_and(|v| v == "1") {
        eprintln!("SKIPPED: real-Dolphin test disabled by SHINE_SKIP_REAL_DOLPHIN=1");
        return;
    }
    let (ok, out, err) = run(&["doctor"]);
    assert!(ok, "doctor with Dolphin installed must pass (if Dolphin or gcc-powerpc-linux-gnu is missing, run .ci/run's install step):\n{out}\n{err}");
    for check in ["ok    dolphin: ", "Dolphin 5.0", "ok    boot: ", "ok    frames: ", "ok    pipe: ", "all checks passed"] {
        assert!(out.contains(check), "missing {check:?} in:\n{out}");
    }
    // Peek live guest memory: the probe's mailbox magic, then its loop counter moving.
    let dir = tempfile::tempdir().unwrap();
    let dol = shine_bridge::dolphin::probe::build(dir.path()).unwrap();
    let (ok, out, err) = run(&["doctor", "--exec", dol.to_str().unwrap(), "--peek", "0x80400000"]);
    assert!(ok, "{out}\n{err}");
    // Five peeks; on a loaded machine the first may come before the probe has written
    // its magic, but once there it stays.
    let peeks: Vec<bool> = out.lines().filter(|l| l.contains("peek 0x80400000")).map(|l| l.ends_with("= 0x53484e50")).collect();
    assert_eq!(peeks.len(), 5, "{out}");
    let first = peeks.iter().position(|&m| m).unwrap_or_else(|| panic!("the probe's magic never showed: {out}"));
    assert!(peeks[first..].iter().all(|&m| m), "the magic stays once written: {out}");
    let (_, out, _) = run(&["doctor", "--exec", dol.to_str().unwrap(), "--peek", "80400008"]);
    let values: Vec<&str> = out.lines().filter(|l| l.contains("peek 0x80400008")).collect();
    assert_eq!(values.len(), 5, "{out}");
    assert!(values.windows(2).any(|w| w[0] != w[1]), "the probe's loop counter is live: {values:?}");
}

#[test]
fn run_with_dolphin_feeds_the_manager_and_restarts_crashed_emulators() {
    let peer = peer();
    let dir = tempfile::tempdir().unwrap();
    // Each "Dolphin" aborts after 2,500 frames, so every environment's emulator dies
    // several times during the test and must be started again.
    let scenario = scenario_file(dir.path(), "seed = 3\ncrash_after = 2500\n");
    let m = manager(dir.path(), "worker-e2e.toml");
    let port = m.port;
    let manager = m.start();
    let mut worker = start_worker(dir.path(), port, &["--backend", "dolphin", "--dolphin", peer.to_str().unwrap(), "--iso", scenario.to_str().unwrap()]);
    wait_for(
        HANG,
        "gameplay from the Dolphin backend, across emulator crashes",
        || metric(port, "shine_experiences_total").unwrap_or(0.0) >= 2000.0 && worker.log().matches("environment failed, restarting its episode").count() >= 2,
        &manager,
    );
    let workers = http_get(port, "/api/v1/workers").unwrap();
    assert!(workers.contains("\"backend\":\"dolphin\""), "the manager lists a dolphin worker: {workers}");
    worker.signal("TERM");
    assert!(worker.wait(HANG).success(), "worker log:\n{}", worker.log());
    let stats = read_stats(dir.path());
    assert!(u(&stats, "transitions_generated") > 0, "{stats}");
    assert_eq!(u(&stats, "transitions_uploaded"), u(&stats, "transitions_generated"), "{stats}");
    assert_eq!(metric(port, "shine_experiences_total").unwrap() as u64, u(&stats, "transitions_uploaded"), "the manager counted each transition once");
}

#[test]
fn play_against_a_person_plays_whole_matches_with_the_bot_on_either_port() {
    // The peer's stand-in for the person picks Marth and plays (in the match) like the
    // simulator's CPU at level 9; one stock each, so a match ends when either falls.
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path(), "seed = 21\nhuman_character = Marth\nhuman_level = 9\nstocks = 1\n");
    for (human, bot) in [("1", 2), ("2", 1)] {
        let (ok, out, err) = play_against_the_stand_in(&scenario, human, "2");
        assert!(ok, "person on port {human}:\n{out}\n{err}");
        assert!(err.contains(&format!("controller on port {human} (the bot is Fox on port {bot})")), "{err}");
        let matches = match_lines(&out);
        assert_eq!(matches.len(), 2, "two whole matches, one after the other:\n{out}");
        // An idle bot loses its one stock to a level-9 CPU: the person's side won.
        assert!(matches.iter().all(|l| l.contains("you won: stocks left bot 0, you 1")), "{out}");
        assert!(out.contains("the bot won 0 of 2 matches against you (you won 2, 0 even on stocks)"), "{out}");
    }
    // What a person gets wrong is said before Dolphin starts.
    let (ok, _, err) = run(&["play", "--human-port", "1", "--policy", "idle"]);
    assert!(!ok && err.contains("--backend dolphin"), "{err}");
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--iso", "x", "--human-port", "2", "--bot-port", "2"]);
    assert!(!ok && err.contains("different ports"), "{err}");
    let (ok, _, err) = run(&["play", "--backend", "dolphin", "--iso", "x", "--human-port", "1", "--human-device", "evdev/0/Pad"]);
    assert!(!ok && err.contains("--human-profile"), "{err}");
}

#[test]
fn a_match_whose_clock_runs_out_counts_even_on_stocks() {
    // Melee's time limit (the peer's `time_limit`): two seconds of play, four stocks
    // each, so neither side can fall before the clock ends the match ("TIME!"): it
    // leaves the screen with both fighters standing and counts, even on stocks.
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path(), "seed = 22\nhuman_level = 9\nstocks = 4\ntime_limit = 2\n");
    let (ok, out, err) = play_against_the_stand_in(&scenario, "1", "2");
    assert!(ok, "{out}\n{err}");
    let matches = match_lines(&out);
    assert_eq!(matches.len(), 2, "{out}");
    assert!(matches.iter().all(|l| l.contains("even on stocks: stocks left bot 4, you 4")), "{out}");
    assert!(out.contains("the bot won 0 of 2 matches against you (you won 0, 2 even on stocks)"), "{out}");
}

#[test]
fn a_person_who_takes_their_time_mistoggles_and_changes_character_sets_the_pace() {
    // Issue 40, through the peer's stand-in for a person: at every visit of character
    // select it rests 4,500 frames (75 s of game time, past the walk's old 20 s budget
    // and the minute after which a still hand is reported); at its first visit it
    // presses its own HMN/CPU toggle by mistake and starts that match; it plays Luigi,
    // then Marth, then Luigi (a character per match started); it presses START and
    // picks the stage itself.
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path(), "seed = 41\nhuman_character = Luigi, Marth\nhuman_wait = 4500\nhuman_mistake = toggle\nhuman_level = 9\nstocks = 1\n");
    let (ok, out, err) = play_against_the_stand_in(&scenario, "1", "2");
    assert!(ok, "{out}\n{err}");
    let matches = match_lines(&out);
    // The match their port played as Melee's CPU (Luigi, the first) was quit and not
    // counted; then the person's Marth, then their Luigi: they changed character
    // between matches, which a START pressed by the bot as the banner showed prevented.
    assert_eq!(matches.len(), 2, "{out}");
    assert!(matches[0].contains("you as Marth: you won") && matches[1].contains("you as Luigi: you won"), "{out}");
    for said in [
        "waiting for you: put your coin on a character (port 1)",
        "no input from port 1 for a minute: is your controller in the adapter's port 1?",
        "your slot (port 1) is set to CPU",
        "port 1 played as Melee's CPU (its slot was not HMN): quitting that match; it is not counted",
        "waiting for you: press START on port 1",
        "waiting for you: pick a stage (port 1)",
    ] {
        assert!(err.contains(said), "the terminal says {said:?}:\n{err}");
    }
}

#[test]
fn against_a_person_the_state_is_the_bots_point_of_view_whichever_port_it_has() {
    use shine_agent::StateReader;
    use shine_bridge::sim::Sim;
    use shine_bridge::{Emulator, MatchSetup, Pad, Stick};
    let peer = peer();
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenario_file(dir.path(), "seed = 31\nhuman_character = Marth\nhuman_level = 6\n");
    let dolphin = shine_worker::games::backend::DolphinSetup::check(Some(&scenario), Some(peer)).unwrap();
    for (bot, person) in [(0usize, 1usize), (1, 0)] {
        let setup = MatchSetup { agent_port: bot, opponent_port: person, cpu_level: 6, ..MatchSetup::default() };
        let mut emu = dolphin.launch_against_person(setup, shine_bridge::dolphin::HumanPad::Adapter, shine_bridge::melee::characters::FOX).unwrap();
        emu.reset(setup, 0).unwrap();
        // The same match on the simulator, read by the same reader: equal states, frame
        // by frame, with the bot's 13 floats second and its opponent's first.
        let mut sim = Sim::new(setup, 31);
        let (mut a, mut b) = (StateReader::new(), StateReader::new());
        for f in 0..300 {
            let pad = Pad { main: Stick::new(if f % 120 < 60 { 0.0 } else { 1.0 }, 0.5), ..Pad::NEUTRAL };
            emu.step(&pad).unwrap();
            sim.step(&pad).unwrap();
            let (got, want) = (a.read(emu.ram(), &setup).unwrap(), b.read(sim.ram(), &setup).unwrap());
            assert_eq!(got.state, want.state, "bot on port {}, frame {f}", bot + 1);
            let me = emu.ram().player(bot).unwrap();
            assert_eq!((got.agent.x, got.agent.y), (me.x().unwrap(), me.y().unwrap()), "the agent's facts are the bot's port's");
            assert_eq!(got.state[13], (me.x().unwrap() + 250.0) / 500.0, "the bot's x is float 13, its opponent's float 0");
        }
    }
}

#[test]
fn a_marth_model_plays_marth_against_a_person() {
    // Issue 46: the person path returned before the side check, so a Marth model put
    // its coin on Fox. Now its coin goes on Marth (the navigator checks the fighter
    // in the match, and the peer starts it with the character the coin is on).
    let dir = tempfile::tempdir().unwrap();
    let marth = side_model_file(dir.path(), ActionSet::Fight, Side::Marth, 7);
    let scenario = scenario_file(dir.path(), "seed = 22\nhuman_character = Fox\nhuman_level = 9\nstocks = 1\n");
    let (ok, out, err) = run(&person_args(&scenario, &["--model", &marth, "--human-port", "1", "--episodes", "1"]));
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("(the bot is Marth on port 2)"), "{err}");
    assert_eq!(match_lines(&out).len(), 1, "{out}");
    assert!(match_lines(&out)[0].contains("you as Fox"), "{out}");
    // A side the model was not trained for is refused, naming its side, before Dolphin starts.
    let (ok, _, err) = run(&person_args(&scenario, &["--model", &marth, "--human-port", "1", "--side", "fox"]));
    assert!(!ok && err.contains("the model plays marth (its file says so); it cannot play --side fox"), "{err}");
}

#[test]
fn a_person_who_presses_the_bots_toggle_and_start_at_once_does_not_get_a_match_counted_for_the_bot() {
    // Issue 46: any hand can press the bot's HMN/CPU toggle; with START right after,
    // Melee's CPU played the bot's port and the match was counted as the bot's. The
    // stand-in does just that at its first visit; that match is quit and not counted.
    let (out, err) = one_match_against_the_stand_in("seed = 42\nhuman_mistake = bot_toggle\nhuman_level = 9\nstocks = 1\n");
    assert!(
        err.contains("the bot's port 2 played as Melee's CPU (a hand pressed its HMN/CPU toggle before START): quitting that match; it is not counted"),
        "{err}"
    );
    // One match played, with the bot's own pipe on its port: the idle bot loses it.
    assert!(match_lines(&out)[0].contains("you as Luigi: you won: stocks left bot 0, you 1"), "{out}");
}

#[test]
fn an_unplugged_controller_is_said_at_once_and_the_slot_melee_turned_to_cpu_after_it() {
    // Issue 46: Melee shows a port with no controller at once (the hand's state 3) and
    // turns a human slot into a CPU; the walk waited a minute of still hand, then asked
    // for a toggle press the unplugged controller could not make. The stand-in's
    // controller is out for the first 300 frames of character select, then back in.
    let (_, err) = one_match_against_the_stand_in("seed = 43\nhuman_unplug = 300\nhuman_level = 9\nstocks = 1\n");
    let at = |needle: &str| err.find(needle).unwrap_or_else(|| panic!("the terminal says {needle:?}:\n{err}"));
    let unplugged = at("no controller in port 1: plug yours into the GameCube controller adapter's port 1");
    let slot = at("your slot (port 1) is set to CPU (Melee does that when a controller is unplugged");
    assert!(unplugged < slot && slot < at("waiting for you: press START on port 1"), "{err}");
    assert!(!err.contains("no input from port 1 for a minute"), "{err}");
}

/// `play --human-port 1` against the stand-in in a process group of its own, as a
/// terminal's foreground job; its merged output in `log`.
fn start_session(dir: &std::path::Path, scenario: &str, episodes: &str) -> Proc {
    use std::os::unix::process::CommandExt;
    let image = scenario_file(dir, scenario);
    let args = person_args(&image, &["--human-port", "1", "--policy", "idle", "--episodes", episodes]);
    let mut cmd = std::process::Command::new(WORKER);
    cmd.args(&args).process_group(0);
    spawn(&mut cmd, dir.join("session.log"))
}

/// The Dolphin of a session, as its first line says: its pid and its user folder.
fn session_dolphin(log: &str) -> (u32, std::path::PathBuf) {
    let line = log.lines().find(|l| l.starts_with("Dolphin is up (pid ")).unwrap_or_else(|| panic!("{log}"));
    let pid = line["Dolphin is up (pid ".len()..].split(',').next().unwrap().parse().unwrap();
    let folder = line.split("user folder ").nth(1).unwrap().split("):").next().unwrap();
    (pid, folder.into())
}

/// A session whose walk waits for the person (the stand-in rests at character
/// select): the worker, and its Dolphin's pid and user folder.
fn session_waiting_for_the_person(dir: &std::path::Path, seed: u32) -> (Proc, u32, std::path::PathBuf) {
    let p = start_session(dir, &format!("seed = {seed}\nhuman_wait = 1000000\n"), "3");
    wait_for(HANG, "the walk to wait for the person", || p.log().contains("waiting for you: put your coin on a character (port 1)"), &p);
    let (pid, folder) = session_dolphin(&p.log());
    assert!(folder.is_dir(), "{}", p.log());
    (p, pid, folder)
}

#[test]
fn ctrl_c_stops_dolphin_removes_its_folder_and_sums_up_the_matches_played() {
    // Issue 46: Ctrl-C left Shine's temporary Dolphin home behind and printed nothing.
    // First while the walk waits for the person (the stand-in rests), the signal to the
    // worker alone: it must stop the Dolphin itself.
    let dir = tempfile::tempdir().unwrap();
    let (mut p, pid, folder) = session_waiting_for_the_person(dir.path(), 44);
    p.signal("INT");
    assert!(p.wait(HANG).success(), "{}", p.log());
    let log = p.log();
    assert!(log.contains("stopped (Ctrl-C): Dolphin is stopped and its user folder removed"), "{log}");
    assert!(log.contains("the bot won 0 of 0 matches against you"), "{log}");
    assert!(!folder.exists(), "the user folder {} is removed:\n{log}", folder.display());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "Dolphin (pid {pid}) is stopped:\n{log}");

    // Then in the middle of a session, the signal to the whole process group, as a
    // terminal sends it (Dolphin gets it too): the summary counts the matches played.
    let dir = tempfile::tempdir().unwrap();
    let mut p = start_session(dir.path(), "seed = 45\nhuman_level = 9\nstocks = 1\n", "1000");
    wait_for(HANG, "a first match played", || p.log().contains("match   1: "), &p);
    let (_, folder) = session_dolphin(&p.log());
    let ok = std::process::Command::new("kill").args(["-INT", "--", &format!("-{}", p.child.id())]).status().unwrap().success();
    assert!(ok, "kill -INT to the process group");
    assert!(p.wait(HANG).success(), "{}", p.log());
    let log = p.log();
    let played = match_lines(&log).len();
    assert!(played >= 1 && log.contains(&format!("the bot won 0 of {played} matches against you (you won {played}, 0 even on stocks)")), "{log}");
    assert!(log.contains("stopped (Ctrl-C)") || log.contains("Dolphin was closed: the session ends"), "{log}");
    assert!(!folder.exists(), "the user folder {} is removed:\n{log}", folder.display());
}

#[test]
fn the_guides_play_command_plays_a_fight_model_against_the_stand_in_and_says_each_step() {
    // docs/play-your-bot.md, "Play", as written, with `--dolphin` pointing at the peer
    // (standing in for mainline Dolphin; its stand-in for you plays Marth):
    //   shine-worker play --backend dolphin --iso ~/games/melee.iso --model fight.safetensors --human-port 1
    // The lines the guide quotes, in its order, and the summary.
    let dir = tempfile::tempdir().unwrap();
    let model = side_model_file(dir.path(), ActionSet::Fight, Side::Fox, 5);
    std::fs::rename(&model, dir.path().join("fight.safetensors")).unwrap();
    let scenario = dir.path().join("melee.iso");
    std::fs::write(&scenario, "seed = 46\nhuman_character = Marth\nhuman_level = 9\nstocks = 1\n").unwrap();
    let peer = peer();
    let args = ["play", "--backend", "dolphin", "--iso", scenario.to_str().unwrap(), "--model", "fight.safetensors", "--human-port", "1"];
    let (ok, stdout, stderr) = run_worker_with(&args, |c| {
        c.current_dir(dir.path()).args(["--dolphin", peer.to_str().unwrap(), "--episodes", "2"]);
    });
    assert!(ok, "{stdout}\n{stderr}");
    let at = |needle: &str, after: usize| after + stderr[after..].find(needle).unwrap_or_else(|| panic!("{needle:?} after {after} in:\n{stderr}"));
    let mut i = at("Dolphin is up (pid ", 0);
    i = at("pick your character with the controller on port 1 (the bot is Fox on port 2), then press START and pick a stage", i);
    i = at("Ctrl-C here, or Esc in Dolphin's window, ends the session", i);
    i = at("waiting for you: put your coin on a character (port 1)", i);
    i = at("waiting for you: press START on port 1 when ready (change character first if you like)", i);
    at("waiting for you: pick a stage (port 1)", i);
    let matches = match_lines(&stdout);
    assert_eq!(matches.len(), 2, "{stdout}");
    assert!(matches.iter().all(|l| l.contains(": you as Marth: ") && l.contains("stocks left bot ") && l.ends_with(" s")), "{stdout}");
    assert!(stdout.lines().last().unwrap().starts_with("the bot won ") && stdout.contains(" of 2 matches against you (you won "), "{stdout}");
}

#[test]
fn ctrl_c_ends_play_against_the_cpu_in_dolphin_with_the_report_of_the_episodes_played() {
    // The same for `play --backend dolphin` against Melee's CPU: whenever the signal
    // lands (Dolphin booting, the menus, a match), the episodes played are reported and
    // the user folder (`/tmp/shine-d/<pid>-0`) is gone.
    let dir = tempfile::tempdir().unwrap();
    let image = scenario_file(dir.path(), "seed = 47\n");
    let mut cmd = std::process::Command::new(WORKER);
    cmd.args(person_args(&image, &["--policy", "dodge", "--episodes", "100000"]));
    let mut p = spawn(&mut cmd, dir.path().join("play.log"));
    let folder = std::env::temp_dir().join("shine-d").join(format!("{}-0", p.child.id()));
    wait_for(HANG, "Dolphin's user folder", || folder.is_dir(), &p);
    p.signal("INT");
    assert!(p.wait(HANG).success(), "{}", p.log());
    let log = p.log();
    let played = log.lines().filter(|l| l.starts_with("episode")).count();
    assert!(log.contains(&format!("stopped (Ctrl-C) after {played} of 100000 episodes")), "{log}");
    assert!(log.lines().last().unwrap().starts_with("policy dodge, CPU level 9: full-minute survival"), "{log}");
    assert!(!folder.exists(), "the user folder {} is removed:\n{log}", folder.display());
}

#[test]
fn dolphin_closed_by_the_person_ends_the_session_with_its_summary() {
    // Esc in Dolphin's window (or the window closed) ends Dolphin; the session ends
    // with the summary, not an error, and at once, not after the menus' minute of
    // waiting for a frame. Here Dolphin (the peer) is ended by SIGTERM while the walk
    // waits for the person.
    let dir = tempfile::tempdir().unwrap();
    let (mut p, pid, folder) = session_waiting_for_the_person(dir.path(), 48);
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    assert!(p.wait(HANG).success(), "{}", p.log());
    let log = p.log();
    assert!(log.contains("Dolphin was closed: the session ends") && log.contains("the bot won 0 of 0 matches against you"), "{log}");
    assert!(!folder.exists(), "the user folder {} is removed:\n{log}", folder.display());
}
