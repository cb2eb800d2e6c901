//! `shine-worker eval` and `play` as a user runs them: survival for the Untouchable
//! task, wins, stocks and damage for the fight task, and the scripted CPU on the bot's
//! side as a baseline.

mod procs;

use procs::{run_worker as run, side_model_file};
use shine_agent::actions::ActionSet;
use shine_agent::Side;


fn model_file(dir: &std::path::Path, set: ActionSet) -> String {
    side_model_file(dir, set, Side::Fox, 4)
}

/// The numbers after `key` in a report line, e.g. "won 12.5 % (1/8)" -> 12.5.
fn figure(line: &str, key: &str) -> f64 {
    let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key:?} in {line:?}")) + key.len()..];
    rest.trim_start().split([' ', ',', ';']).next().unwrap().parse().unwrap_or_else(|e| panic!("{key:?} in {line:?}: {e}"))
}

/// The spread after `key`'s figure: "damage dealt 184.0 +/- 3.5 %" -> 3.5.
fn spread(line: &str, key: &str) -> f64 {
    let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key:?} in {line:?}"))..];
    figure(rest, "+/-")
}

#[test]
fn a_fight_model_is_evaluated_on_the_fight_task() {
    // docs/play-your-bot.md's `shine-worker eval --model fight.safetensors --episodes 200`
    // (8 episodes here).
    let dir = tempfile::tempdir().unwrap();
    let fight = model_file(dir.path(), ActionSet::Fight);
    let (ok, out, err) = run(&["eval", "--model", &fight, "--episodes", "8"]);
    assert!(ok, "{err}");
    let line = out.lines().last().unwrap();
    assert!(line.starts_with("model v4, fight, CPU level 9: won "), "{line}");
    for key in ["stocks taken", "stocks lost", "damage dealt", "damage taken"] {
        assert!(line.contains(key), "{key} missing: {line}");
    }
    let (won, drawn, lost) = (figure(line, "won") / 100.0 * 8.0, figure(line, "drawn"), figure(line, "lost"));
    assert_eq!((won + drawn + lost).round(), 8.0, "every match is won, drawn or lost: {line}");

    // The same model on the untouchable task reports survival instead.
    let (ok, out, err) = run(&["eval", "--model", &fight, "--episodes", "4", "--task", "untouchable"]);
    assert!(ok, "{err}");
    assert!(out.contains("model v4, CPU level 9: full-minute survival"), "{out}");

    // An untouchable model is still reported as before.
    let untouchable = model_file(dir.path(), ActionSet::Untouchable);
    let (ok, out, err) = run(&["eval", "--model", &untouchable, "--episodes", "4"]);
    assert!(ok, "{err}");
    assert!(out.contains("model v4, CPU level 9: full-minute survival"), "{out}");
}

#[test]
fn fight_baselines_idle_loses_and_the_cpu_in_the_bots_place_fights_back() {
    let common = ["play", "--task", "fight", "--episodes", "6", "--cpu-level", "9", "--seed", "1000000"];
    let line = |policy: &[&str]| {
        let mut args = common.to_vec();
        args.extend(policy);
        let (ok, out, err) = run(&args);
        assert!(ok, "{policy:?}: {err}");
        out.lines().last().unwrap().to_string()
    };
    let idle = line(&["--policy", "idle", "--quiet"]);
    assert!(idle.starts_with("policy idle, fight, CPU level 9: won 0.0 % (0/6)"), "{idle}");
    assert_eq!(figure(&idle, "damage dealt"), 0.0, "{idle}");
    assert!(figure(&idle, "damage taken") > 0.0, "{idle}");

    let cpu = line(&["--policy", "cpu", "--bot-level", "9", "--quiet"]);
    assert!(cpu.starts_with("the level-9 CPU in the bot's place, fight, CPU level 9: won "), "{cpu}");
    assert!(figure(&cpu, "damage dealt") > 10.0, "the CPU in the bot's place deals damage: {cpu}");

    // Per-episode lines name the outcome and the stocks.
    let (ok, out, err) = run(&["play", "--task", "fight", "--policy", "random", "--episodes", "2"]);
    assert!(ok, "{err}");
    assert!(out.lines().take(2).all(|l| l.contains(": stocks ") && (l.contains("win") || l.contains("draw") || l.contains("loss"))), "{out}");

    let (ok, _, err) = run(&["play", "--task", "fight", "--policy", "dodge", "--episodes", "1"]);
    assert!(!ok);
    assert!(err.contains("--policy dodge plays the untouchable task only"), "{err}");
}

#[test]
fn a_marth_model_plays_marth_against_a_fox_model_or_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let marth = side_model_file(dir.path(), ActionSet::Fight, Side::Marth, 6);
    let fox = side_model_file(dir.path(), ActionSet::Fight, Side::Fox, 9);
    let (ok, out, err) = run(&["eval", "--model", &marth, "--opponent", &format!("model:{fox}"), "--episodes", "6"]);
    assert!(ok, "{err}");
    assert!(err.contains("epsilon-greedily (0.05)"), "{err}");
    let line = out.lines().last().unwrap();
    assert!(line.starts_with("model v6 as marth, fight, against model v9 (fox), epsilon 0.05: won "), "{line}");
    // The same matches seen from the other side (each fighter's random actions drawn
    // from its own stream): its wins are the Marth model's losses.
    let (ok, out2, err) = run(&["eval", "--model", &fox, "--opponent", &format!("model:{marth}"), "--episodes", "6"]);
    assert!(ok, "{err}");
    let line2 = out2.lines().last().unwrap();
    assert!(line2.starts_with("model v9, fight, against model v6 (marth), epsilon 0.05: won "), "{line2}");
    assert_eq!((figure(line, "won") / 100.0 * 6.0).round(), figure(line2, "lost"), "{line} / {line2}");
    assert_eq!(figure(line, "damage dealt"), figure(line2, "damage taken"), "{line} / {line2}");
    // Greedy against greedy, the simulator plays one match six times: nothing varies.
    // With the default epsilon the matches differ.
    let (ok, greedy, err) = run(&["eval", "--model", &fox, "--opponent", &format!("model:{marth}"), "--episodes", "6", "--epsilon", "0"]);
    assert!(ok, "{err}");
    let greedy = greedy.lines().last().unwrap();
    assert!(greedy.starts_with("model v9, fight, against model v6 (marth): won "), "{greedy}");
    assert_eq!(spread(greedy, "damage dealt") + spread(greedy, "damage taken"), 0.0, "{greedy}");
    assert!(spread(line2, "damage dealt") + spread(line2, "damage taken") > 0.0, "{line2}");
    let (ok, _, err) = run(&["eval", "--model", &fox, "--opponent", &format!("model:{marth}"), "--epsilon", "1.5"]);
    assert!(!ok && err.contains("expected a chance from 0 to 1"), "{err}");

    // Against the scripted CPU, which then plays Fox.
    let (ok, out, err) = run(&["eval", "--model", &marth, "--opponent", "cpu:5", "--episodes", "2"]);
    assert!(ok, "{err}");
    assert!(out.lines().last().unwrap().starts_with("model v6 as marth, fight, CPU level 5: won "), "{out}");

    // The scripted CPU in Marth's place against the level-9 CPU Fox: the baseline a
    // Marth bot must beat. Built-in policies play Marth when asked.
    let (ok, out, err) = run(&["play", "--policy", "cpu", "--task", "fight", "--side", "marth", "--opponent", "cpu:9", "--episodes", "4", "--quiet"]);
    assert!(ok, "{err}");
    let line = out.lines().last().unwrap();
    assert!(line.starts_with("the level-9 CPU in the bot's place as marth, fight, CPU level 9: won "), "{line}");
    assert!(figure(line, "damage dealt") > 10.0, "the CPU Marth fights: {line}");
    let (ok, out, err) = run(&["play", "--policy", "random", "--task", "fight", "--side", "marth", "--opponent", "policy:idle", "--episodes", "2", "--quiet"]);
    assert!(ok, "{err}");
    let line = out.lines().last().unwrap();
    assert!(line.starts_with("policy random as marth, fight, against policy idle: won "), "{line}");
    assert_eq!(figure(line, "damage taken"), 0.0, "an idle Fox deals nothing: {line}");
}

#[test]
fn an_opponent_of_the_wrong_side_or_action_set_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fox = side_model_file(dir.path(), ActionSet::Fight, Side::Fox, 3);
    let fox2 = side_model_file(dir.path(), ActionSet::Fight, Side::Fox, 5);
    let marth_untouchable = side_model_file(dir.path(), ActionSet::Untouchable, Side::Marth, 7);
    let refused = |args: &[&str], want: &str| {
        let (ok, out, err) = run(args);
        assert!(!ok, "{args:?} was accepted: {out}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.is_empty(), "nothing is played: {out}");
    };
    refused(&["eval", "--model", &fox, "--opponent", &format!("model:{fox2}")], "plays fox, the bot's own side");
    refused(&["eval", "--model", &fox, "--opponent", &format!("model:{marth_untouchable}")], "both sides must play the same action set");
    refused(&["eval", "--model", &fox, "--side", "marth"], "the model plays fox");
    refused(&["eval", "--model", &fox, "--opponent", "cpu:10"], "the CPU's level is 1 to 9");
    refused(&["eval", "--model", &fox, "--opponent", "policy:cpu"], "expected policy:idle, policy:random or policy:dodge");
    refused(&["eval", "--model", &fox, "--opponent", "human"], "expected cpu:LEVEL, model:FILE or policy:NAME");
    refused(&["eval", "--model", &fox, "--opponent", "model:/nonexistent.safetensors"], "reading the model file /nonexistent.safetensors");
    refused(&["eval", "--model", &fox, "--opponent", "cpu:3", "--cpu-level", "3"], "cannot be used with");
    refused(&["play", "--task", "fight", "--policy", "random", "--opponent", "policy:dodge"], "--policy dodge plays the untouchable task only");
    refused(&["play", "--backend", "dolphin", "--policy", "random", "--side", "marth"], "in Dolphin the bot plays Fox");
    refused(&["play", "--backend", "dolphin", "--human-port", "1", "--policy", "random", "--opponent", "cpu:3"], "do not go with --human-port");
}
