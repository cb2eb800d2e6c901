#!/usr/bin/env python3
"""Shine's experiment driver: builds (or takes --bin), starts a manager and workers on
this machine, polls the manager's progress, evaluates the trained bots and tabulates.
Each experiment is a preset of it; the scripts of the same names run them:

    scripts/experiment.py learn [MINUTES] ...       scripts/learn.sh: one learning run
    scripts/experiment.py seeds SEED... ...         scripts/learn-seeds.sh: several seeds, one table
    scripts/experiment.py gpu-learn ...             scripts/gpu-learn.sh: a GPU learner and a fleet
    scripts/experiment.py selfplay [MINUTES] ...    scripts/selfplay.sh: two runs against each other
    scripts/experiment.py league SELFPLAY BASELINE  scripts/selfplay-league.sh: the league's table
    scripts/experiment.py sweep GRID.toml ...       scripts/sweep.sh: a grid of settings and seeds as runs of one manager

`scripts/experiment.py PRESET --help` lists each one's options. docs/learning.md says
what each measures and docs/lab-notebook.md records the runs.
"""
import argparse
import bisect
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone

import grid
import harness
from harness import ROOT, get_json


def binaries(args):
    """The folder with shine-manager and shine-worker: --bin, else fresh release builds."""
    return args.bin or harness.build()


def fresh_dir(path):
    """path emptied (a run's data folder starts empty), with its logs folder."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.join(path, "logs"), exist_ok=True)


def fail(message, status=1):
    """Ends the experiment with message; status 2 for what was asked (a missing file),
    1 for what went wrong."""
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(status)


def pct(v):
    return "-" if v is None else f"{100 * v:.0f} %"


class Tee:
    """Lines to the terminal and to a file, as `| tee FILE` would."""

    def __init__(self, path, mode="w"):
        self.file = open(path, mode)

    def __call__(self, text):
        if text == "":  # a command that printed nothing adds no line
            return
        text = text if text.endswith("\n") else text + "\n"
        sys.stdout.write(text)
        sys.stdout.flush()
        self.file.write(text)
        self.file.flush()


def tool(bindir, *args):
    """A shine-worker play/eval command's report (its stdout; its progress on stderr is
    dropped). A command that fails ends the experiment with its message."""
    p = subprocess.run([os.path.join(bindir, "shine-worker"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        fail(f"shine-worker {' '.join(args)} failed (status {p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout


def time_limit(args):
    """The training time asked for, in whole seconds: --seconds, or --minutes."""
    return args.seconds if args.seconds is not None else int(args.minutes * 60)


def min_sec(secs):
    """`secs` as the scripts print a duration: "M min S s"."""
    return f"{secs // 60} min {secs % 60} s"


def train_until(limit, stop_at_steps, poll):
    """Calls poll() every minute (every 2 s with a step count to stop at, or every
    `limit` seconds under a minute) until `limit` seconds have passed or poll returns a
    reason to stop, which is printed; returns the seconds trained."""
    start = time.time()
    tick = 2 if stop_at_steps else min(limit, 60)
    while time.time() - start < limit:
        time.sleep(tick)
        reason = poll(start)
        if reason:
            print(reason, flush=True)
            break
    return start, int(time.time() - start)


# ---------------------------------------------------------------------------- learn


def learn(args):
    """One learning run (docs/learning.md): train, write the curve, evaluate, tabulate."""
    if not os.path.isfile(args.config):
        fail(f"no config file {args.config}", 2)
    base_text = open(args.config).read()
    if args.prioritized and re.search(r"^\[replay\]", base_text, re.M):
        fail(f"--prioritized adds a [replay] table, but {args.config} has one: set sampling = \"prioritized\" there instead", 2)
    found = re.search(r'^task *= *"(.*)"', base_text, re.M)
    task = found.group(1) if found else "untouchable"
    limit = time_limit(args)
    episodes = args.eval_episodes
    bindir = binaries(args)

    data = args.data
    fresh_dir(data)
    config = args.config
    if args.prioritized:
        # The config has no [replay] table (checked above): one appended is the only change.
        config = os.path.join(data, "manager.toml")
        with open(config, "w") as f:
            f.write(base_text + '\n[replay]\nsampling = "prioritized"\n')
    token = harness.token()
    url = "http://127.0.0.1:8090"
    logs = os.path.join(data, "logs")
    described = (f"{args.config}, task {task}, worker seed {args.seed}, {args.workers} worker(s) x {args.envs} env(s)"
                 f"{', device ' + args.device if args.device else ''}{', prioritized replay' if args.prioritized else ''}")
    with harness.Fleet() as fleet:
        fleet.start_manager([os.path.join(bindir, "shine-manager"), "--config", config, "--data-dir", data, "--token", token,
                             *(["--device", args.device] if args.device else [])], os.path.join(logs, "manager.log"), url)
        for i in range(args.workers):
            # The first worker's log keeps its old name (docs/lab-notebook.md cites worker.log).
            log = os.path.join(logs, "worker.log" if i == 0 else f"worker-{i}.log")
            fleet.start_worker([os.path.join(bindir, "shine-worker"), "run", "--manager", url, "--token", token, "--envs", args.envs,
                                "--seed", str(args.seed + 1000 * i), "--spool-dir", os.path.join(data, f"spool-{i}")], log)

        print(f"training for {min_sec(limit)}"
              f"{f' (or until the evaluation window reaches {args.stop_at})' if args.stop_at is not None else ''}"
              f"{f' (or until {args.stop_at_steps} train steps)' if args.stop_at_steps else ''}, "
              f"{described} (logs in {logs})", flush=True)

        def progress(start):
            try:
                s = get_json(url + "/api/v1/stats?since=9e99")["current"]
            except OSError as e:  # a busy manager: skip this line, the run goes on
                print(f"(no progress line: {e})", file=sys.stderr, flush=True)
                return None
            print(f"{(time.time() - start) / 60:5.1f} min  steps {s['train_steps']:>9,}  inserted {s['transitions_inserted']:>10,}  "
                  f"model v{s['model_version']}  loss {s['loss'] or 0:.4f}  training reward {s['episode_reward'] or 0:.2f}  "
                  f"survival: training {pct(s['train_survival'])}, evaluation {pct(s['eval_survival'])}", flush=True)
            if args.stop_at is not None and s["eval_survival"] is not None and s["eval_survival"] >= args.stop_at:
                return f"the evaluation window reached {args.stop_at}: training stops here"
            if args.stop_at_steps and s["train_steps"] >= args.stop_at_steps:
                return f"the manager counted {args.stop_at_steps} train steps: training stops here"
            return None

        start, elapsed = train_until(limit, args.stop_at_steps, progress)
        # The learner's and the fleet's rates over the whole run, from the manager's counters.
        c = get_json(url + "/api/v1/stats?since=9e99")["current"]
        secs = max(float(elapsed), 1.0)
        rates = rates_line(c["train_steps"], c["transitions_inserted"], secs)
        write_curve(get_json(url + "/api/v1/history/default?max_points=100000", timeout=60), lambda t: (t - int(start)) / 60,
                    os.path.join(data, "curve.csv"))
        final = os.path.join(data, "final.safetensors")
        harness.download(url + "/api/v1/models/latest", final)

    say = Tee(os.path.join(data, "result.txt"))
    say(f"training: {elapsed // 60} minutes ({described}); evaluation: {episodes} episodes at CPU level 9, seeds 1000000..")
    say(rates)
    curve = read_curve(os.path.join(data, "curve.csv"))
    say(f"first at 90 % survival: the evaluation window at {when(first_at_90(curve, 'eval_survival'))}, "
        f"the last minute's models at {when(first_at_90(curve, 'minute_eval_survival'))}")
    say(tool(bindir, "eval", "--model", final, "--task", task, "--episodes", str(episodes), "--cpu-level", "9"))
    if args.baselines:
        if task == "fight":
            policies = [["--policy", "idle"], ["--policy", "random"], ["--policy", "cpu", "--bot-level", "1"], ["--policy", "cpu", "--bot-level", "9"]]
        else:
            policies = [["--policy", "idle"], ["--policy", "random"], ["--policy", "dodge"]]
        for policy in policies:
            say(tool(bindir, "play", "--task", task, *policy, "--episodes", str(episodes), "--cpu-level", "9", "--seed", "1000000", "--quiet"))


def read_curve(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def read_rows(path):
    with open(path) as f:
        return list(csv.reader(f))


def first_at_90(curve, column):
    """(minutes, train steps) of the curve's first row where column reached 90 %, or None."""
    r = next((r for r in curve if r.get(column) and float(r[column]) >= 0.9), None)
    return (float(r["minutes"]), int(r["train_steps"])) if r else None


def when(first):
    """first_at_90's answer as the tables say it."""
    return f"minute {first[0]:.1f} ({first[1]:,} steps)" if first else "never"


def write_curve(history, minutes_of, path):
    """The learning curve, from the manager's own time series, each sample at
    minutes_of(its unix time) (learn: minutes since it started). eval_survival is the
    manager's window (its last [stats] recent_episodes = 1,000 evaluation episodes),
    which spans several minutes of models and so trails the models' own level;
    minute_eval_survival is the evaluation episodes of the models published in the 60 s
    before the sample (each model's record, from the history; blank under 20 episodes):
    noisier, without the lag."""
    series, evals = history["series"], {e["version"]: e for e in history["evals"]}
    times = [s["t"] for s in series]

    def minute_eval(i):
        """Survival over the evaluation episodes of the models published in (t - 60, t]."""
        before = bisect.bisect_right(times, times[i] - 60) - 1
        first = series[before]["model_version"] + 1 if before >= 0 else 1
        played = [evals[v] for v in range(first, series[i]["model_version"] + 1) if v in evals]
        episodes = sum(e["episodes"] for e in played)
        # Fewer than 20 episodes is too few to read (3 of 3 is not 100 %).
        return sum(e["survived"] for e in played) / episodes if episodes >= 20 else None

    blank = lambda v: "" if v is None else v
    with open(path, "w") as f:
        f.write("minutes,train_steps,transitions_inserted,model_version,eval_survival,minute_eval_survival,train_survival,episode_reward\n")
        for i, s in enumerate(series):
            f.write(f"{minutes_of(s['t']):.2f},{s['train_steps']},{s['transitions_inserted']},{s['model_version']},"
                    f"{blank(s['eval_survival'])},{blank(minute_eval(i))},{blank(s['train_survival'])},{blank(s['episode_reward'])}\n")


# ---------------------------------------------------------------------------- seeds


def seeds(args):
    """learn once per seed, back to back, then one table of how each learned."""
    label = args.label or ("prioritized" if args.prioritized else "uniform")
    out = args.out or f"data/learn-seeds/{label}"
    os.makedirs(out, exist_ok=True)
    # The table's heading names the minutes as learn-seeds.sh always has.
    shown = str(round(args.seconds / 60, 2)) if args.seconds is not None else f"{args.minutes:g}"
    args.bin = binaries(args)  # built once for every seed
    for s in args.seeds:
        print(f"=== seed {s} ({label}) ===", flush=True)
        args.seed, args.data = s, f"{out}/seed-{s}"
        learn(args)
    say = Tee(os.path.join(out, "summary.md"))
    say(seeds_table(out, label, shown, args.stop_at, args.seeds))


# The final model's line in a result.txt (shine-worker eval's report): its survival of
# the Untouchable task, or the fights it won.
FINAL = re.compile(r"^model v(\d+), .*?: (?:full-minute survival|won) ([\d.]+) % \((\d+)/(\d+)\), 95 % interval ([\d.]+-[\d.]+) %", re.M)


class RunResult:
    """One run's figures, from its folder's curve.csv and result.txt (learn's, or a
    sweep's run): the minutes trained, when the evaluation window and the last
    minute's models first reached 90 % (first_at_90's), the final model's evaluation
    (its percentage, or None) and the rates."""

    def __init__(self, d):
        curve = read_curve(f"{d}/curve.csv")
        self.window, self.models = first_at_90(curve, "eval_survival"), first_at_90(curve, "minute_eval_survival")
        text = open(f"{d}/result.txt").read()
        self.trained = re.search(r"^training: (\d+) minutes", text, re.M).group(1)
        m = FINAL.search(text)
        self.final = float(m.group(2)) if m else None
        self.final_text = f"v{m.group(1)}: {m.group(2)} % ({m.group(3)}/{m.group(4)}), {m.group(5)} %" if m else "(no evaluation)"
        r = re.search(r"^rates: (\d+) train steps/s, (\d+) transitions/s", text, re.M)
        self.rates = (r.group(1), r.group(2)) if r else ("-", "-")


def seeds_table(out, label, minutes, stop_at, seeds):
    """The table of several seeds' runs under out/seed-N/, from their curve.csv and
    result.txt: when each first reached 90 %, the final model at level 9, the rates;
    then the medians and the spread."""
    stop_at = "" if stop_at is None else f"{stop_at:g}"
    rows = [(s, RunResult(f"{out}/seed-{s}")) for s in seeds]
    lines = [f"## {label}: {len(seeds)} seeds of scripts/learn.sh {minutes}{' --stop-at ' + stop_at if stop_at else ''}\n",
             "| worker seed | trained (min) | evaluation window first >= 90 % | last minute's models first >= 90 % | final model at level 9 (greedy, seeds 1,000,000..) | train steps/s | transitions/s |",
             "|---:|---:|---|---|---|---:|---:|"]
    for s, r in rows:
        lines.append(f"| {s} | {r.trained} | {when(r.window)} | {when(r.models)} | {r.final_text} | {r.rates[0]} | {r.rates[1]} |")
    reached = sum(1 for _, r in rows if r.final is not None and r.final >= 90.0)
    lines.append(f"\nfinal model >= 90 %: {reached} of {len(rows)} seeds")
    # A seed that never got there counts as later than any that did.
    never = float("inf")
    show = lambda m: f"after {minutes}" if m == never else f"{m:.1f}"
    for what, got in [("evaluation window", [r.window for _, r in rows]), ("last minute's models", [r.models for _, r in rows])]:
        all_minutes = sorted(f[0] if f else never for f in got)
        lines.append(f"{what} first >= 90 %: median minute {show(statistics.median_low(all_minutes))}, "
                     f"spread {show(all_minutes[0])} to {show(all_minutes[-1])} ({sum(1 for f in got if f)} of {len(got)} seeds got there)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- gpu-learn


def gpu_learn(args):
    """The seeds preset with a GPU learner and as many workers as leave it a core or
    two; the seeds' output goes to a log, the table to the terminal."""
    device = args.device or ("cuda" if subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0 else "cpu")
    workers = args.workers if args.workers != "auto" else max(os.cpu_count() - 2, 1)
    out = os.environ.get("OUT", "data/gpu-learn")
    os.makedirs(out, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    say = Tee(os.path.join(out, "machine.txt"))
    say(f"commit {commit}, {datetime.now(timezone.utc):%Y-%m-%dT%H:%MZ}, {os.cpu_count()} cores")
    if device.startswith("cuda"):
        say(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True).stdout)
    per_seed = f"{args.seconds:g} s" if args.seconds is not None else f"{args.minutes:g} min"
    say(f"device {device}, {workers} worker(s) x {args.envs} env(s), {args.config}, stop at {args.stop_at:g}, at most {per_seed} a seed")

    command = [sys.executable, os.path.join(ROOT, "scripts", "experiment.py"), "seeds",
               *(["--seconds", str(args.seconds)] if args.seconds is not None else ["--minutes", str(args.minutes)]),
               "--config", args.config, "--stop-at", str(args.stop_at), "--out", out, "--label", f"gpu-learn ({device})",
               "--device", device, "--workers", str(workers), "--envs", args.envs, "--eval-episodes", str(args.eval_episodes),
               *(["--bin", args.bin] if args.bin else []),
               *(["--stop-at-steps", str(args.stop_at_steps)] if args.stop_at_steps else []),
               *([] if args.baselines else ["--no-baselines"]), *args.seeds.split()]
    log = os.path.join(out, "learn-seeds.log")
    with open(log, "w") as f:
        rc = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        sys.stderr.write("".join(open(log, errors="replace").readlines()[-40:]))
        fail(f"a seed failed; its logs are under {out}")
    sys.stdout.write(open(os.path.join(out, "summary.md")).read())


# ---------------------------------------------------------------------------- selfplay


def selfplay(args):
    """configs/selfplay.toml (a Fox run and a Marth run, each the other's opponent), one
    worker per run, then each run's last model against the CPU and against the other."""
    if args.baseline and not os.path.isfile(args.baseline):
        fail(f"no model file {args.baseline}", 2)
    limit = time_limit(args)
    episodes = args.eval_episodes
    bindir = binaries(args)
    data = args.data
    # Read before the data folder is emptied: the baseline may live under it.
    baseline = open(args.baseline, "rb").read() if args.baseline else None
    fresh_dir(data)
    if baseline is not None:
        with open(os.path.join(data, "baseline-fox.safetensors"), "wb") as f:
            f.write(baseline)
    token = harness.token()
    url = "http://127.0.0.1:8091"
    logs = os.path.join(data, "logs")
    runs = ["fox", "marth"]
    seeds = f"worker seeds {args.seed} and {args.seed + 1000}"
    with harness.Fleet() as fleet:
        fleet.start_manager([os.path.join(bindir, "shine-manager"), "--config", "configs/selfplay.toml", "--data-dir", data,
                             "--token", token], os.path.join(logs, "manager.log"), url)
        for i, run in enumerate(runs):
            fleet.start_worker([os.path.join(bindir, "shine-worker"), "run", "--manager", url, "--token", token, "--run", run,
                                "--envs", args.envs, "--seed", str(args.seed + 1000 * i), "--spool-dir", os.path.join(data, f"spool-{run}"),
                                "--stats-file", os.path.join(logs, f"worker-{run}.json")], os.path.join(logs, f"worker-{run}.log"))
        say = Tee(os.path.join(data, "progress.log"))
        say(f"self-play for {min_sec(limit)}, configs/selfplay.toml, {seeds}, {args.envs} env(s) each (logs in {logs})")

        def progress(start):
            line = [f"{(time.time() - start) / 60:5.1f} min"]
            for run in runs:
                try:
                    s = get_json(f"{url}/api/v1/runs/{run}/stats?since=9e99")["current"]
                except OSError as e:  # a busy manager: skip this line, the run goes on
                    print(f"(no progress line: {e})", file=sys.stderr, flush=True)
                    return None
                line.append(f"{run}: steps {s['train_steps']:>9,}  inserted {s['transitions_inserted']:>10,}  v{s['model_version']}  "
                            f"training reward {s['episode_reward'] or 0:.2f}  evaluation (minute lasted) {pct(s['eval_survival'])}")
            say(" | ".join(line))
            return None

        _, elapsed = train_until(limit, None, progress)
        for run in runs:
            harness.download(f"{url}/api/v1/runs/{run}/models/latest", os.path.join(data, f"{run}.safetensors"))

    fox, marth = os.path.join(data, "fox.safetensors"), os.path.join(data, "marth.safetensors")
    say = Tee(os.path.join(data, "result.txt"))
    say(f"self-play: {elapsed // 60} minutes (configs/selfplay.toml, {seeds}, {args.envs} env(s) each); {episodes} matches each, seeds 1000000..")
    ev = lambda *a: say(tool(bindir, "eval", "--episodes", str(episodes), *a))
    ev("--model", fox, "--opponent", "cpu:9")
    ev("--model", marth, "--opponent", "cpu:9")
    say(tool(bindir, "play", "--task", "fight", "--policy", "cpu", "--bot-level", "9", "--side", "marth", "--opponent", "cpu:9",
             "--episodes", str(episodes), "--seed", "1000000", "--quiet"))
    ev("--model", fox, "--opponent", f"model:{marth}")
    if baseline is not None:
        ev("--model", os.path.join(data, "baseline-fox.safetensors"), "--opponent", f"model:{marth}")


# ---------------------------------------------------------------------------- league


LEAGUE_CONFIG = """[server]
listen = "127.0.0.1:{port}"
[game]
action_set = "fight"
task = "fight"
[registry]
keep_last = 1
keep_best = 0
keep_best_rated = 0
[league]
# Half of each worker's time; the other half idles (their runs are paused).
share = 0.5
[dqn]
n_step = 5
[[runs]]
name = "fox"
paused = true
[[runs]]
name = "marth"
paused = true
game = {{ side = "marth" }}
[[runs]]
name = "fox-cpu"
paused = true
"""


def league(args):
    """A manager whose runs hold only the final models of a self-play run's two runs and
    of a Fox trained against the CPU alone, paused (nothing trains), with workers that
    play nothing but league matches; the table once the league has played enough."""
    bindir = binaries(args)
    data = args.data
    shutil.rmtree(data, ignore_errors=True)

    def take(source, run):
        # Each run: its checkpoint (so that the manager resumes it rather than publishing
        # fresh weights) and its newest model file only.
        if not os.path.isfile(os.path.join(source, "checkpoint", "checkpoint.safetensors")):
            fail(f"no checkpoint in {source}", 2)
        models = os.path.join(data, "runs", run, "models")
        os.makedirs(models)
        shutil.copytree(os.path.join(source, "checkpoint"), os.path.join(data, "runs", run, "checkpoint"))
        newest = sorted(n for n in os.listdir(os.path.join(source, "models")) if re.fullmatch(r"model-.*\.safetensors", n))[-1]
        shutil.copy(os.path.join(source, "models", newest), models)
        print(f"{run}: {newest} from {source}", flush=True)
    take(os.path.join(args.selfplay_dir, "runs", "fox"), "fox")
    take(os.path.join(args.selfplay_dir, "runs", "marth"), "marth")
    take(os.path.join(args.baseline_dir, "runs", "default"), "fox-cpu")

    port = 8092
    token = harness.token()
    url = f"http://127.0.0.1:{port}"
    config = os.path.join(data, "manager.toml")
    with open(config, "w") as f:
        f.write(LEAGUE_CONFIG.format(port=port))
    with harness.Fleet() as fleet:
        fleet.start_manager([os.path.join(bindir, "shine-manager"), "--config", config, "--data-dir", data, "--token", token],
                            os.path.join(data, "manager.log"), url)
        for i in range(2):
            fleet.start_worker([os.path.join(bindir, "shine-worker"), "run", "--manager", url, "--token", token, "--run", "fox",
                                "--envs", "1", "--seed", str(100 + i), "--spool-dir", os.path.join(data, f"spool-{i}")],
                               os.path.join(data, f"worker-{i}.log"))
        print(f"playing {args.matches} league matches (logs in {data})", flush=True)
        while True:
            if fleet.manager.poll() is not None:
                fail(f"shine-manager exited; see {data}/manager.log")
            try:
                if get_json(url + "/api/v1/league")["matches"] >= args.matches:
                    break
            except OSError:  # a busy manager: ask again
                pass
            time.sleep(10)
        harness.download(url + "/api/v1/league", os.path.join(data, "league.json"), timeout=20)
    with open(os.path.join(data, "league.json")) as f:
        print(league_table(json.load(f)))


def league_table(t):
    """GET /api/v1/league as text: the ratings, then head to head."""
    lines = [f"{t['matches']} matches", f"{'player':<16}{'rating':>8}{'dev':>6}{'95 % interval':>18}{'matches':>9}  won-drawn-lost"]
    for p in t["players"]:
        name = p["player"] + ("" if p["cpu"] is not None else f" ({p['side']})")
        lines.append(f"{name:<16}{p['rating']:>8.0f}{p['deviation']:>6.0f}{p['low']:>10.0f}-{p['high']:<7.0f}{p['matches']:>9}  {p['won']}-{p['drawn']}-{p['lost']}")
    names = t["head_to_head_players"]
    lines.append("\nhead to head (row's win rate against column, matches):")
    for name, row in zip(names, t["head_to_head"]):
        cells = ["" if c is None else f"{100 * c['win_rate']:.0f} % ({c['matches']})" for c in row]
        lines.append(f"{name:<12}" + "".join(f"{c:>14}" for c in cells))
    lines.append(" " * 12 + "".join(f"{n:>14}" for n in names))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- sweep


def sweep(args):
    """A grid of settings and seeds (scripts/grid.py reads it) as the runs of one
    manager, each with its own workers, each stopped by its own rules; finished runs
    are paused, their models, curves and settings kept, and their workers go to the
    runs that are behind. OUT/sweep.json records what is done, so the same command
    resumes a stopped or crashed sweep from the runs' checkpoints (a finished run is
    not trained again). Then each run's final model is evaluated and the table made."""
    try:
        g = grid.read(args.grid)
    except grid.GridError as e:
        fail(str(e), 2)
    runs, points = g.runs(), g.points()
    out = args.out or os.path.join("data", "sweep", os.path.splitext(os.path.basename(args.grid))[0])
    state_path = os.path.join(out, "sweep.json")
    state = None
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
        if {n: r["setting"] for n, r in state["runs"].items()} != {name: grid.label(points[i], False) for name, i, _ in runs}:
            fail(f"{out} holds a sweep of other runs or settings ({', '.join(sorted(state['runs']))}): give another --out, or delete {out} "
                 f"to start again", 2)
    elif os.path.exists(out) and os.listdir(out):
        fail(f"{out} is not empty and holds no sweep.json: give another --out, or delete it", 2)
    bindir = binaries(args)
    try:
        grid.check(g, os.path.join(bindir, "shine-manager"), args.device)
    except grid.GridError as e:
        fail(str(e), 2)

    if state is None:
        state = {"grid": args.grid, "sessions": [], "runs": {name: {"setting": grid.label(points[i], False), "seed": seed, "workers_started": 0,
                                                                 "finished": None} for name, i, seed in runs}}
    else:
        print(f"resuming the sweep in {out}: " + ", ".join(f"{n} {'finished' if r['finished'] else 'to train'}" for n, r in state["runs"].items()), flush=True)
    for name, _, _ in runs:
        os.makedirs(os.path.join(out, "runs", name), exist_ok=True)
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    save_state(state_path, state)
    todo = [name for name, _, _ in runs if not state["runs"][name]["finished"]]
    if todo:
        train_sweep(args, g, runs, todo, state, state_path, bindir, out)

    for name, i, seed in runs:
        d = os.path.join(out, "runs", name)
        if not os.path.exists(os.path.join(d, "result.txt")):
            evaluate_run(bindir, d, state["runs"][name]["finished"], args.eval_episodes)
    # Every run's curve in one file, each row with its run, setting and seed.
    with open(os.path.join(out, "curves.csv"), "w", newline="") as f:
        table = csv.writer(f)
        for n, (name, i, seed) in enumerate(runs):
            curve = read_rows(os.path.join(out, "runs", name, "curve.csv"))
            if n == 0:
                table.writerow(["run", "setting", "seed", *curve[0]])
            table.writerows([name, grid.label(points[i]), seed, *row] for row in curve[1:])
    say = Tee(os.path.join(out, "summary.md"))
    say(sweep_table(g, runs, out, args))


def save_state(path, state):
    """sweep.json written whole or not at all (a crash mid-write keeps the old one)."""
    with open(path + ".tmp", "w") as f:
        json.dump(state, f, indent=1)
    os.replace(path + ".tmp", path)


def trained_minutes(sessions, t):
    """The sweep's training time in minutes at unix time t, over its sessions ([start,
    last seen] each): a stop or a crash between two sessions counts nothing."""
    before = 0.0
    for start, end in sessions:
        if t < start:
            break
        if t <= end:
            return (before + t - start) / 60
        before += end - start
    return before / 60


def pick_run(todo, workers_in, steps):
    """The run a free worker joins: of those still training, the one with the fewest
    train steps (the furthest behind its share), then the fewest workers, then the
    first in the grid; at the start, when none has trained, one worker each in turn."""
    return min(todo, key=lambda r: (workers_in.get(r, 0) > 0, steps.get(r, 0), workers_in.get(r, 0), todo.index(r)))


def train_sweep(args, g, runs, todo, state, state_path, bindir, out):
    """One session: the manager with every run, workers for the runs in `todo`, each
    run stopped by the rules; returns once every run is finished."""
    workers = args.workers or len(todo)
    if workers < len(todo):
        fail(f"--workers {workers}: {len(todo)} runs to train need at least one worker each", 2)
    config = os.path.join(out, "manager.toml")
    with open(config, "w") as f:
        f.write(open(g.base).read() + "\n# The sweep's runs (scripts/experiment.py sweep " + args.grid + ")\n" + grid.runs_toml(g, runs))
    token = harness.token()
    logs = os.path.join(out, "logs")
    limit = time_limit(args)
    with harness.Fleet() as fleet:
        url = fleet.start_manager([os.path.join(bindir, "shine-manager"), "--config", config, "--data-dir", os.path.join(out, "data"),
                                   "--listen", f"127.0.0.1:{args.port}", "--token", token, *(["--device", args.device] if args.device else [])],
                                  os.path.join(logs, f"manager-{len(state['sessions'])}.log"), None if args.port == 0 else f"http://127.0.0.1:{args.port}")
        listing = {r["name"]: r for r in get_json(url + "/api/v1/runs")["runs"]}
        for name in state["runs"]:
            # A finished run stays paused (the manager remembers it too); one the sweep
            # has not finished trains, even if it was left paused (a crash between the
            # pause and sweep.json saying finished).
            finished = bool(state["runs"][name]["finished"])
            if listing[name]["paused"] != finished:
                harness.post_json(f"{url}/api/v1/runs/{name}/{'pause' if finished else 'resume'}", token)
        session = [time.time(), time.time()]
        state["sessions"].append(session)
        members = {}  # worker process -> its run

        def start_worker(run):
            r = state["runs"][run]
            k = r["workers_started"]
            r["workers_started"] += 1
            p = fleet.start_worker([os.path.join(bindir, "shine-worker"), "run", "--manager", url, "--token", token, "--run", run,
                                    "--envs", args.envs, "--seed", str(r["seed"] + 1000 * k),
                                    "--spool-dir", os.path.join(out, "spool", f"{run}-{k}")], os.path.join(logs, f"{run}-worker-{k}.log"))
            members[p] = run
            print(f"worker {run}-{k} (seed {r['seed'] + 1000 * k}) trains {run}", flush=True)

        steps = {name: listing[name]["train_steps"] for name in todo}
        for _ in range(workers):
            start_worker(pick_run(todo, Counter(members.values()), steps))
        save_state(state_path, state)
        print(f"sweep of {len(runs)} runs ({len(todo)} to train) with {workers} worker(s) x {args.envs} env(s); each run stops "
              f"at {min_sec(limit)} of the sweep's training"
              f"{f', or once its evaluation window reaches {args.stop_at:g}' if args.stop_at is not None else ''}"
              f"{f', or at {args.stop_at_steps} train steps' if args.stop_at_steps else ''}; "
              f"the dashboard: {url}/ (logs in {logs})", flush=True)

        last_line = 0.0
        while todo:
            time.sleep(2)
            if fleet.manager.poll() is not None:
                fail(f"shine-manager exited; see {logs}/manager-{len(state['sessions']) - 1}.log")
            try:
                listing = {r["name"]: r for r in get_json(url + "/api/v1/runs")["runs"]}
            except OSError as e:  # a busy manager: ask again
                print(f"(no progress: {e})", file=sys.stderr, flush=True)
                continue
            session[1] = time.time()
            minutes = trained_minutes(state["sessions"], session[1])
            ending = []
            for name in todo:
                r = listing[name]
                reason = (f"{min_sec(limit)} trained" if minutes * 60 >= limit else
                          f"its evaluation window reached {args.stop_at:g}" if args.stop_at is not None and (r["eval_survival"] or 0) >= args.stop_at else
                          f"{args.stop_at_steps} train steps counted" if args.stop_at_steps and r["train_steps"] >= args.stop_at_steps else None)
                if reason:
                    ending.append(name)
                    finish_run(url, token, out, name, reason, state, minutes)
            # Their workers go (a paused run takes no more uploads: each gives up on its
            # last within 15 s, meanwhile the others train on), and as many start for the
            # runs still training, furthest behind first.
            todo[:] = [n for n in todo if n not in ending]
            freed = [p for p, run in members.items() if run in ending]
            for p in freed:
                fleet.stop_worker(p)
                del members[p]
            if todo:
                steps = {n: listing[n]["train_steps"] for n in todo}
                for _ in freed:
                    start_worker(pick_run(todo, Counter(members.values()), steps))
            save_state(state_path, state)
            if todo and time.time() - last_line >= 60:
                last_line = time.time()
                print(f"{minutes:5.1f} min  " + "  ".join(f"{n}: {listing[n]['train_steps']:,} steps, {pct(listing[n]['eval_survival'])}" for n in todo), flush=True)
        # What the manager says of every run as the session ends (for the record, and
        # for the resume test: a finished run's counters stay where they were).
        harness.download(url + "/api/v1/runs", os.path.join(logs, f"runs-{len(state['sessions']) - 1}.json"))


def finish_run(url, token, out, name, reason, state, minutes):
    """A run's end: paused (no more train steps once answered), then its settings and
    counters (GET /api/v1/runs/{run}), its latest model and its curve kept, and
    sweep.json told, last (a crash before that leaves it to train again)."""
    harness.post_json(f"{url}/api/v1/runs/{name}/pause", token)
    d = os.path.join(out, "runs", name)
    view = get_json(f"{url}/api/v1/runs/{name}")
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump(view, f, indent=1)
    harness.download(f"{url}/api/v1/runs/{name}/models/latest", os.path.join(d, "final.safetensors"))
    sessions = state["sessions"]
    write_curve(get_json(f"{url}/api/v1/history/{name}?max_points=100000", timeout=60), lambda t: trained_minutes(sessions, t), os.path.join(d, "curve.csv"))
    state["runs"][name]["finished"] = {"reason": reason, "minutes": minutes, "train_steps": view["train_steps"],
                                       "transitions_inserted": view["transitions_inserted"]}
    print(f"{name} finished ({reason}) at minute {minutes:.1f}: {view['train_steps']:,} train steps, model v{view['model_version']}", flush=True)


def rates_line(steps, transitions, secs):
    """result.txt's rates line (RunResult and the test command read it)."""
    return (f"rates: {steps / secs:.0f} train steps/s, {transitions / secs:.0f} transitions/s inserted "
            f"({steps:,} steps, {transitions:,} transitions in {secs:.0f} s)")


def evaluate_run(bindir, d, finished, episodes):
    """A finished run's result.txt, as learn writes its own: training, rates, and its
    final model evaluated greedily against the level-9 CPU."""
    with open(os.path.join(d, "run.json")) as f:
        task = json.load(f)["settings"]["game"]["task"]
    secs = max(finished["minutes"] * 60, 1.0)
    report = tool(bindir, "eval", "--model", os.path.join(d, "final.safetensors"), "--task", task, "--episodes", str(episodes), "--cpu-level", "9")
    with open(os.path.join(d, "result.txt"), "w") as f:
        f.write(f"training: {int(finished['minutes'])} minutes (stopped: {finished['reason']}); evaluation: {episodes} episodes at CPU level 9, seeds 1000000..\n"
                f"{rates_line(finished['train_steps'], finished['transitions_inserted'], secs)}\n{report}")


def sweep_table(g, runs, out, args):
    """One row per setting: the median and spread over its seeds of when the evaluation
    window and the last minute's models first reached 90 % and of the final model's
    evaluation, sorted by the grid's `sort`; the group each setting trains in; then
    every run's own row."""
    points = g.points()
    results = {name: RunResult(os.path.join(out, "runs", name)) for name, _, _ in runs}
    views = {}
    for name, _, _ in runs:
        with open(os.path.join(out, "runs", name, "run.json")) as f:
            views[name] = json.load(f)
    by_setting = {i: [name for name, j, _ in runs if j == i] for i in range(len(points))}
    # A seed that never got to 90 % counts as later than any that did.
    never = float("inf")

    def median(values):
        """The middle value, or the mean of the middle two; "never" when one of them
        is (half the seeds or more never got there)."""
        v = sorted(values)
        middle = v[(len(v) - 1) // 2:len(v) // 2 + 1]
        return never if never in middle else sum(middle) / len(middle)

    def at_90(names, figure):
        """The seeds' (train steps, minutes) when `figure` first reached 90 %, and how
        many got there."""
        got = [getattr(results[n], figure) for n in names]
        return [f[1] if f else never for f in got], [f[0] if f else never for f in got], sum(1 for f in got if f)

    def finals(names):
        return [results[n].final for n in names if results[n].final is not None]

    def key(i):
        if g.sort == "final":
            f = finals(by_setting[i])
            return -median(f) if f else never
        return median(at_90(by_setting[i], g.sort)[0])

    shapes = {}
    for i in range(len(points)):
        shapes.setdefault(grid.shape(views[by_setting[i][0]]["settings"]), []).append(i)
    letters = {shape: chr(ord("A") + k) for k, shape in enumerate(s for s in shapes if s is not None)}
    letters[None] = "alone"
    group_of = {i: letters[shape] for shape, members in shapes.items() for i in members}

    def first(names, figure):
        steps, minutes, reached = at_90(names, figure)
        show = lambda v: "never" if v == never else f"{v:,.0f}"
        if not reached:
            return f"never; 0 of {len(names)}"
        m = median(minutes)
        return (f"{show(median(steps))}{' steps' if m != never else ''} ({show(min(steps))} to {show(max(steps))})"
                f"{f', minute {m:.1f}' if m != never else ''}; {reached} of {len(names)}")

    constant = [f"{a.key} = {grid.toml_value(a.values[0])}" for a in g.axes if len(a.values) == 1]
    limit = time_limit(args)
    stops = (min_sec(limit) + (f", --stop-at {args.stop_at:g}" if args.stop_at is not None else "")
             + (f", --stop-at-steps {args.stop_at_steps}" if args.stop_at_steps else ""))
    lines = [f"## sweep {args.grid}: {len(points)} settings x {len(g.seeds)} seeds ({', '.join(map(str, g.seeds))}) of {os.path.relpath(g.base)}"
             f"{'; every run: ' + ', '.join(constant) if constant else ''}; each run stopped at {stops}; sorted by {grid.FIGURES[g.sort]}\n",
             "| setting | group | evaluation window first >= 90 %: median train steps (spread), minute; seeds there | last minute's models first >= 90 % | final model at level 9: median (spread) | train steps (median) |",
             "|---|---|---|---|---|---:|"]
    for i in sorted(range(len(points)), key=lambda i: (key(i), i)):
        names = by_setting[i]
        f = finals(names)
        final = f"{median(f):.1f} % ({min(f):.1f} to {max(f):.1f}; {len(f)} runs)" if f else "(no evaluation)"
        steps = median([views[n]["train_steps"] for n in names])
        lines.append(f"| {grid.label(points[i])} | {group_of[i]} | {first(names, 'window')} | {first(names, 'models')} | {final} | {steps:,.0f} |")
    grouped = sorted({tuple(v["group"]) for v in views.values() if v.get("group")})
    lines.append("")
    lines.append(f"group: the settings of one letter share what a grouped step needs ({', '.join(grid.SHAPE_KEYS)}; "
                 f"a CUDA graph or not: {', '.join(grid.GRAPH_KEYS)}) and can train as "
                 f"one step on CUDA; \"alone\": a setting that never groups ({', '.join(grid.ALONE_KEYS)}). This grid: "
                 + ("one group." if set(group_of.values()) == {"A"} else f"{len(set(group_of.values()))} groups of their own."))
    lines.append("trained as grouped steps: " + "; ".join(", ".join(m) for m in grouped) if grouped else
                 "trained in turns, each run its own step (no grouped step: the CPU, or [trainer] grouped = false)")
    lines += ["", "| run | setting | seed | stopped | evaluation window first >= 90 % | last minute's models first >= 90 % | final model | train steps |",
              "|---|---|---:|---|---|---|---|---:|"]
    for name, i, seed in runs:
        r = results[name]
        with open(os.path.join(out, "runs", name, "result.txt")) as f:
            stopped = re.search(r"\(stopped: (.*)\)", f.readline()).group(1)
        lines.append(f"| {name} | {grid.label(points[i])} | {seed} | {stopped} | {when(r.window)} | {when(r.models)} | {r.final_text} | {views[name]['train_steps']:,} |")
    lines.append(f"\ncurves: {os.path.join(out, 'curves.csv')} (every run's, minutes of the sweep's training); the runs' files: {os.path.join(out, 'runs')}/")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- presets


def positive(value):
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"takes a number from 1, not {value}")
    return n


def eval_episodes_default():
    # SHINE_EVAL_EPISODES: the older way to set --eval-episodes, still honoured.
    return int(os.environ.get("SHINE_EVAL_EPISODES", 200))


def bin_option(p):
    p.add_argument("--bin", metavar="DIR", help="a folder with shine-manager and shine-worker already built (default: release builds)")


def eval_option(p, what):
    p.add_argument("--eval-episodes", type=positive, default=eval_episodes_default(), metavar="N", help=f"{what} (default 200)")


def device_envs_options(p):
    p.add_argument("--device", metavar="D", help="the manager's training device (shine-manager --device: auto, cpu, cuda, cuda:N; default: the config's)")
    p.add_argument("--envs", default="1", metavar="E", help="environments per worker (shine-worker --envs: a number or auto; default 1)")


def learner_options(p, config="configs/learn.toml"):
    """The options of one learning run (learn), which seeds and gpu-learn pass on."""
    p.add_argument("--seconds", type=positive, metavar="S", help="training time in seconds instead of minutes (a short check)")
    p.add_argument("--config", default=config, metavar="FILE", help=f"the manager's config (default {config}; configs/fight.toml trains the fight task)")
    p.add_argument("--stop-at", type=float, metavar="F",
                   help="stop training early once the manager's evaluation window reaches F (0.9 = 90 %% survival), checked every minute")
    p.add_argument("--stop-at-steps", type=positive, metavar="N",
                   help="stop training once the manager's stats count N train steps (checked every 2 s; the stats count in steps of "
                        "the config's [trainer] stats_every): a check that every part ran, whatever the machine's speed, with the "
                        "training time as the limit a hang reaches")
    device_envs_options(p)
    bin_option(p)
    eval_option(p, "the final model's evaluation at CPU level 9 and each baseline's")
    p.add_argument("--no-baselines", dest="baselines", action="store_false",
                   help="evaluate the trained bot only (no idle, random, dodge or CPU rows)")


def parser(name):
    """The parser of one preset."""
    prog = f"scripts/experiment.py {name}"
    if name == "learn":
        p = argparse.ArgumentParser(prog=prog, description=(
            "Proof that Shine learns: train for MINUTES on this machine (one manager, one worker on the simulator), then "
            "evaluate the trained bot greedily against the level-9 CPU over 200 episodes, beside baselines on the same seeds: "
            "idle, random and dodge for the Untouchable task; idle, random and the simulator's CPU in the bot's place at levels "
            "1 and 9 for the fight. Writes DIR/curve.csv (evaluation survival against training time, from the manager's stats "
            "and history: its window, and the models of the last minute), DIR/final.safetensors and DIR/result.txt."))
        p.add_argument("minutes", nargs="?", type=positive, default=30, help="training time in minutes (default 30)")
        learner_options(p)
        p.add_argument("--seed", type=int, default=7, metavar="N", help="the worker's seed (default 7): its matches and its exploration")
        p.add_argument("--prioritized", action="store_true", help='[replay] sampling = "prioritized" on top of the config')
        p.add_argument("--data", metavar="DIR", default="data/learn", help="where everything goes (default data/learn; emptied first)")
        p.add_argument("--workers", type=positive, default=1, metavar="N", help="worker processes (default 1); worker i plays with seed SEED + 1000 i")
    elif name == "seeds":
        p = argparse.ArgumentParser(prog=prog, description=(
            "Several seeds of the learn preset, back to back, and one table of how each learned: the minute at which the "
            "manager's evaluation window first reached 90 % survival, and the minute at which the models published in the "
            "last minute did, with the train steps by then, and the final model's survival at level 9; then the medians and "
            "the spread (min-max) over the seeds. Runs take the whole machine one after the other; nothing else should run "
            "meanwhile. The table is printed and written to OUT/summary.md."))
        p.add_argument("seeds", nargs="+", type=int, metavar="SEED", help="the worker seeds, one run each")
        p.add_argument("--minutes", type=float, default=30, metavar="M", help="training time of each seed (default 30)")
        learner_options(p)
        p.add_argument("--prioritized", action="store_true", help="prioritized replay (learn --prioritized)")
        p.add_argument("--workers", type=positive, default=1, metavar="N", help="worker processes of each run (default 1)")
        p.add_argument("--label", metavar="NAME", help="data/learn-seeds/NAME/seed-N/ holds each run (default uniform or prioritized)")
        p.add_argument("--out", metavar="DIR", help="hold the runs in OUT/seed-N/ instead")
    elif name == "gpu-learn":
        p = argparse.ArgumentParser(prog=prog, description=(
            "The learning run with a GPU learner and a fleet on the same machine: one manager on CUDA, as many workers as "
            "leave it a core or two, seeds back to back, each stopped once its evaluation window reaches --stop-at or at a hard "
            "limit; then the table of how each learned. The same command runs on a machine without a GPU (--device cpu, fewer "
            "workers, a shorter limit); CI runs it so in a small form. Each seed's curve, result and logs go to $OUT/seed-N/ "
            "(default OUT=data/gpu-learn), the seeds' output to $OUT/learn-seeds.log, the table to $OUT/summary.md and, last, "
            "to the terminal."))
        learner_options(p, config="configs/learn-gpu.toml")
        p.set_defaults(stop_at=0.9)
        p.add_argument("--seeds", default="1 2 3", help='worker seeds, one run each (default "1 2 3")')
        p.add_argument("--minutes", type=float, default=4, metavar="M", help="the hard limit of each seed (default 4); --seconds S instead")
        p.add_argument("--workers", default="auto", type=lambda v: v if v == "auto" else positive(v),
                       help="worker processes (default auto: the cores less two, at least one)")
    elif name == "selfplay":
        p = argparse.ArgumentParser(prog=prog, description=(
            "Self-play on this machine: one manager with configs/selfplay.toml (a Fox run and a Marth run, each the other's "
            "opponent), one worker per run on the simulator; then each run's last model evaluated on 200 matches against the "
            "level-9 CPU (greedily) and against each other (each taking a random action 5 % of the time, eval's default for "
            "two models), beside the scripted CPU in Marth's place. Writes DIR/fox.safetensors, DIR/marth.safetensors, "
            "DIR/progress.log and DIR/result.txt."))
        p.add_argument("minutes", nargs="?", type=positive, default=60, help="training time in minutes (default 60)")
        p.add_argument("--seconds", type=positive, metavar="S", help="training time in seconds instead (a short check)")
        p.add_argument("--seed", type=int, default=7, metavar="N", help="the Fox worker's seed (default 7; the Marth worker's is N + 1000)")
        p.add_argument("--data", metavar="DIR", default="data/selfplay", help="where everything goes (default data/selfplay; emptied first)")
        p.add_argument("--envs", default="1", metavar="E", help="environments per worker (default 1)")
        p.add_argument("--baseline", metavar="MODEL", help="a Fox model trained otherwise (learn --config configs/fight.toml): also "
                                                           "evaluated against the final Marth model")
        bin_option(p)
        eval_option(p, "matches of each evaluation")
    elif name == "league":
        p = argparse.ArgumentParser(prog=prog, description=(
            "The league's verdict on a self-play run: a manager whose runs hold only the final models of the selfplay preset's "
            "two runs and of a Fox trained against the CPU alone (learn --config configs/fight.toml), paused (nothing trains), "
            "with workers that play nothing but league matches; the table when the league has played enough. Players: fox "
            "(the self-play Fox), marth (the self-play Marth), fox-cpu (the Fox trained against the CPU), each run's final "
            "model, and the CPU at levels 1, 5 and 9. Writes DIR/league.json (GET /api/v1/league) and prints the table."))
        p.add_argument("selfplay_dir", metavar="SELFPLAY_DIR", help="the selfplay preset's --data (runs fox and marth)")
        p.add_argument("baseline_dir", metavar="BASELINE_DIR", help="the learn preset's --data (run default, the fight task)")
        p.add_argument("--matches", type=positive, default=600, metavar="N", help="league matches to play (default 600)")
        p.add_argument("--data", metavar="DIR", default="data/league", help="where the league manager keeps its data (default data/league; emptied)")
        bin_option(p)
    elif name == "sweep":
        p = argparse.ArgumentParser(prog=prog, description=(
            "A sweep: the grid file's settings (every combination of its [grid] values), each once per seed, as the runs of one "
            "manager on this machine, trained together (as one grouped step on CUDA where their shapes allow, in turns on the "
            "CPU), each with its own workers on the simulator (at least one a run; the others, and those of a finished run, go "
            "to the runs furthest behind in train steps). Each run stops by the rules below, counted from the sweep's start; "
            "a finished run is paused and its model, curve and settings kept. The same command again resumes a stopped or "
            "crashed sweep from the runs' checkpoints, without training a finished run again. Then each run's final model is "
            "evaluated and the table written: one row per setting, the median and spread over its seeds of when the "
            "evaluation window and the last minute's models first reached 90 % and of the final evaluation, sorted by the "
            "grid's `sort`. A grid file with an unknown key or a bad value is refused, naming its line, before anything "
            "starts. Writes OUT/summary.md (the table), OUT/curves.csv (every run's curve), OUT/runs/RUN/ (run.json: its "
            "settings and counters from GET /api/v1/runs/RUN; curve.csv, final.safetensors, result.txt), OUT/sweep.json "
            "(what is done) and OUT/logs/. docs/learning.md, \"Sweeps\", describes the grid file."))
        p.add_argument("grid", metavar="GRID.toml", help="the grid file: base, seeds, sort and [grid] (docs/learning.md, \"Sweeps\")")
        p.add_argument("--minutes", type=float, default=30, metavar="M", help="stop each run after M minutes of the sweep's training (default 30)")
        p.add_argument("--seconds", type=positive, metavar="S", help="S seconds instead of minutes (a short check)")
        p.add_argument("--stop-at", type=float, metavar="F",
                       help="stop a run once its evaluation window reaches F (0.9 = 90 %% survival; GET /api/v1/runs, checked every 2 s)")
        p.add_argument("--stop-at-steps", type=positive, metavar="N",
                       help="stop a run once the manager counts N train steps of it (its stats count in steps of [trainer] stats_every): "
                            "a check that every part ran, whatever the machine's speed, with --minutes as the limit a hang reaches")
        device_envs_options(p)
        bin_option(p)
        eval_option(p, "episodes of each run's final evaluation at CPU level 9")
        p.add_argument("--workers", type=positive, metavar="N", help="worker processes (default: one per run to train; at least that)")
        p.add_argument("--port", type=int, default=8093, metavar="P", help="the manager's port on 127.0.0.1 (default 8093; 0: any free port)")
        p.add_argument("--out", metavar="DIR", help="where everything goes (default data/sweep/GRID, the grid file's name); kept, to resume")
    else:
        return None
    return p


PRESETS = ["learn", "seeds", "gpu-learn", "selfplay", "league", "sweep"]
PROG = "experiment.py"


def main(argv):
    global PROG
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    p = parser(name)
    if p is None:
        print(f"experiment.py: no preset {name}; the presets: {', '.join(PRESETS)} (see scripts/experiment.py --help)", file=sys.stderr)
        return 2
    PROG = f"experiment.py {name}"
    args = p.parse_intermixed_args(rest)
    # Paths on the command line are the repository's, as the scripts have always taken them.
    os.chdir(ROOT)
    if name == "learn":
        learn(args)
    elif name == "seeds":
        seeds(args)
    elif name == "gpu-learn":
        gpu_learn(args)
    elif name == "selfplay":
        selfplay(args)
    elif name == "sweep":
        sweep(args)
    else:
        league(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
