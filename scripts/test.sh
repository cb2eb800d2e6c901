#!/usr/bin/env bash
# Shine's test command (the README's): sets up what is missing, builds every test and
# binary, then runs every test in two lanes side by side (below), printing each lane's
# output whole at the end; exits non-zero if any test failed. Arguments go to the Rust
# test runs (a test name filter, say).
#
# Two cargo runs on purpose: cargo unifies features across the packages of one run, and
# the manager turns on the agent's `torch` feature. Testing the worker in a run of its
# own builds it exactly as users get it, without libtorch (worker/tests/linkage.rs
# checks that with ldd).
#
# What a fresh Debian machine lacks is installed first (scripts/setup-debian.sh: apt-get,
# as root or with sudo, only for a package that is missing), then PyTorch into the
# project's virtual environment (scripts/setup-torch.sh, through env.sh), libmelee and
# numpy beside it (scripts/setup-python.sh), and Chromium and playwright-core for the
# dashboard test (scripts/browser-test.sh).
# SHINE_SKIP_REAL_DOLPHIN=1 skips the real-Dolphin tests and so does not install Dolphin
# or the PowerPC cross compiler.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$(date +%s)
# Steps say how long the command has run. Inside a lane (below) they go to its log and,
# as progress, to the terminal (fd 3).
exec 3>&2
lane=
step() {
    local line="==> [$(( $(date +%s) - started )) s] $*"
    echo "$line" >&2
    [[ -z $lane ]] || echo "[lane $lane] $line" >&3
}

# systemd (systemd-analyze) and cloud-init check the fleet's unit and user-data
# (manager/tests/fleet.rs); procps has the `kill` the end-to-end tests signal with.
pkgs=(systemd cloud-init procps)
# Dolphin (/usr/games/dolphin-emu-nogui) and the PowerPC cross compiler that builds the
# probe, for the real-emulator tests (bridge/tests/real_dolphin.rs, the worker's doctor test).
[ "${SHINE_SKIP_REAL_DOLPHIN:-}" = 1 ] || pkgs+=(dolphin-emu gcc-powerpc-linux-gnu binutils-powerpc-linux-gnu)
# python3 with venv, for setup-torch.sh (Debian splits venv's ensurepip into python3-venv).
python3 -c 'import ensurepip, venv' 2>/dev/null || pkgs+=(python3 python3-venv)
scripts/setup-debian.sh "${pkgs[@]}"

. scripts/env.sh
# One libtorch thread per process: the lanes below already keep both cores busy, and
# libtorch's worker threads spinning beside other processes' slow every test down (the
# numerics tests took 20 minutes instead of 15 seconds that way on two loaded cores).
export OMP_NUM_THREADS=1
# libmelee and numpy for the Slippi adapter (python/shine_bot): its own tests, and
# agent/tests/slippi_replay.rs, which runs it on a real replay.
SHINE_PYTHON=$(scripts/setup-python.sh)
export SHINE_PYTHON

# cargo-nextest (on the README's machines; .config/nextest.toml) runs the tests of every
# test binary side by side, where `cargo test` runs the binaries one after the other and
# a binary's one long test leaves a core idle. It runs each test in a process of its
# own, which for the unit tests of the crates that link libtorch costs a load of it per
# test: those run under `cargo test`, in one process a crate. It runs no doc tests:
# `cargo test --doc` does. Without nextest, cargo test runs everything, only slower.
nextest=
if cargo nextest --version >/dev/null 2>&1; then
    nextest=1
else
    echo "(cargo-nextest not found: cargo test runs the test binaries one at a time; \`cargo install --locked cargo-nextest\` makes this faster)" >&2
fi
#   rust_tests "PACKAGES" LIB_IN_ONE_PROCESS [TEST ARGS...]
rust_tests() {
    local -a packages
    read -ra packages <<<"$1"
    local lib_apart=$2
    shift 2
    if [[ -z $nextest ]]; then
        cargo test "${packages[@]}" "$@"
    elif [[ $lib_apart == 1 ]]; then
        cargo test "${packages[@]}" --lib "$@"
        cargo nextest run "${packages[@]}" -E 'not kind(lib)' "$@"
        cargo test --doc "${packages[@]}"
    else
        cargo nextest run "${packages[@]}" "$@"
        cargo test --doc "${packages[@]}"
    fi
}

# Everything built first, then the tests in two lanes side by side (many of them wait on
# real time: processes starting, matches at 60 fps, timeouts), each lane's output in a
# log of its own, printed whole once both are done, the lanes about equally long. Two
# cargo runs on purpose (above).
step "building the tests and binaries: bridge, agent (with tch), manager, the workspace's checks"
cargo test --no-run --workspace --exclude shine-worker
cargo build --workspace --exclude shine-worker --bins --examples
step "building the tests and binaries: worker (without libtorch)"
# (shine-worker itself too: its tests start it, and so do the scripts below.)
cargo test --no-run -p shine-worker
step "checking the doc comments' links (cargo doc, broken intra-doc links denied)"
# Every crate's docs, private items too: a link to a renamed or removed item fails here
# (checks/tests/doc_names.rs checks the names the docs give in plain backticks).
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" cargo doc --no-deps --workspace --document-private-items --quiet
# Absolute: the scripts below hand it to children that run in other folders (the
# dashboard test runs in web/tests).
debug=$(cd "${CARGO_TARGET_DIR:-target}/debug" && pwd)

lane_logs=$(mktemp -d)
lane_a() {
    step "tests: the Slippi adapter (python/shine_bot)"
    "$SHINE_PYTHON" -m unittest discover -s python/tests
    step "tests: bridge, agent (with tch), manager, the workspace's checks"
    rust_tests "--workspace --exclude shine-worker" 1 "$@"
    step "tests: the GPU scripts in their CPU form (a GPU machine runs them for real)"
    # Each checks that every step ran and counted something, not how fast: the figures
    # are a GPU machine's to report.
    gpu_out=$(mktemp -d)
    OUT=$gpu_out/check scripts/gpu-check.sh --device cpu --small --bin "$debug" >"$gpu_out/check.md"
    # Every table the script gathers is there: the add cost, the train step, the grouped
    # step, PyTorch, the runs.
    for want in '^Adding one experience' '^Train step' '^Grouped step' '^| 128 | eager |' '^ *2 1 manager, grouped' '^ *2 2 managers'; do
        grep -q -- "$want" "$gpu_out/check.md" || { cat "$gpu_out/check.md"; echo "gpu-check.sh: no line matching $want" >&2; return 1; }
    done
    # One seed until the manager counts 1,000 train steps (configs/learn-gpu.toml's
    # stats_every, so the first count its stats show), with 15 minutes as the limit only
    # a hang reaches.
    OUT=$gpu_out/learn scripts/gpu-learn.sh --device cpu --seeds 1 --stop-at-steps 1000 --seconds 900 --workers 2 --bin "$debug" \
        --eval-episodes 4 --no-baselines >"$gpu_out/learn.md"
    # That seed trained (its steps and transitions counted) and its model was evaluated.
    grep -qE '^\| 1 \| [0-9]+ \| .* \| v[0-9]+: [0-9.]+ % \([0-9]+/4\).* \| [0-9]+ \| [0-9]+ \|$' "$gpu_out/learn.md" \
        || { cat "$gpu_out/learn.md"; echo "gpu-learn.sh: no row for seed 1" >&2; return 1; }
    grep -qE '^rates: .*\([1-9][0-9]{0,2}(,[0-9]{3})+ steps, [1-9][0-9,]* transitions in' "$gpu_out/learn/seed-1/result.txt" \
        || { cat "$gpu_out/learn/seed-1/result.txt"; echo "gpu-learn.sh: seed 1 did not count 1,000 train steps and its transitions" >&2; return 1; }
    rm -rf "$gpu_out"
}
lane_b() {
    step "tests: worker (built without libtorch)"
    # The worker's end-to-end tests start the manager built above (worker/tests/e2e.rs).
    rust_tests "-p shine-worker" 0 "$@"

    step "tests: the dashboard in headless Chromium"
    SHINE_BIN=$debug scripts/browser-test.sh
    # (after the browser test, which installs Node.js where it is missing)
    step "tests: the dashboard's modules (node --test)"
    node --test web/tests/unit/

    step "tests: the numerics tests again, under other instruction sets (MKL's AVX-512 paths, libtorch's scalar kernels)"
    # Their bounds are derived from float32 rounding in any summation order (agent's
    # dqn/oracle.rs), so they hold whichever code path MKL and libtorch take; a second
    # path checks it on every run (where the CPU lacks AVX-512, MKL takes its best).
    MKL_ENABLE_INSTRUCTIONS=AVX512 ATEN_CPU_CAPABILITY=default cargo test --workspace --exclude shine-worker --lib numerics

    step "tests: the experiment driver's self-play and league presets, in a small form"
    # Each end to end with real processes, for seconds rather than an hour: the self-play
    # run's four evaluations, a fight run's model for the league, and the league's table.
    exp_out=$(mktemp -d)
    scripts/selfplay.sh --seconds 20 --eval-episodes 4 --bin "$debug" --data "$exp_out/selfplay" >"$exp_out/selfplay.txt" 2>&1 \
        || { cat "$exp_out/selfplay.txt"; echo "selfplay.sh failed" >&2; return 1; }
    [ "$(grep -cE ': won [0-9.]+ % \([0-9]+/4\)' "$exp_out/selfplay/result.txt")" = 4 ] \
        || { cat "$exp_out/selfplay/result.txt"; echo "selfplay.sh: not the four evaluations" >&2; return 1; }
    scripts/learn.sh --config configs/fight.toml --seconds 15 --eval-episodes 4 --no-baselines --bin "$debug" --data "$exp_out/fight" \
        >"$exp_out/fight.txt" 2>&1 || { cat "$exp_out/fight.txt"; echo "learn.sh (fight) failed" >&2; return 1; }
    scripts/selfplay-league.sh "$exp_out/selfplay" "$exp_out/fight" --matches 12 --bin "$debug" --data "$exp_out/league" \
        >"$exp_out/league.txt" 2>&1 || { cat "$exp_out/league.txt"; echo "selfplay-league.sh failed" >&2; return 1; }
    # At least the matches asked for, and a row for each of the three models.
    python3 - "$exp_out/league.txt" <<'PY' || { cat "$exp_out/league.txt"; echo "selfplay-league.sh: not the table" >&2; return 1; }
import re, sys
text = open(sys.argv[1]).read()
played = re.search(r"^(\d+) matches$", text, re.M)
assert played and int(played.group(1)) >= 12, "fewer matches than asked for"
for model in ("fox v", "marth v", "fox-cpu v"):
    assert re.search(rf"^{model}\d+ \(\w+\) +\d+ ", text, re.M), model
PY
    rm -rf "$exp_out"

    step "tests: the sweep preset: a small grid end to end; the grid file's errors and a killed sweep resumed"
    # 2 settings x 2 seeds (scripts/tests/small-grid.toml), each run stopped at 200 train
    # steps (its stats count in 100s), 600 s only a hang reaches.
    sweep_out=$(mktemp -d)
    scripts/sweep.sh scripts/tests/small-grid.toml --stop-at-steps 200 --seconds 600 --eval-episodes 4 --bin "$debug" --port 0 \
        --out "$sweep_out/sweep" >"$sweep_out/sweep.txt" 2>&1 || { cat "$sweep_out/sweep.txt"; echo "sweep.sh failed" >&2; return 1; }
    # A row per setting with its two seeds evaluated, and each run trained with its own
    # learning rate and the shared burn-in, as the manager reports them (run.json: GET
    # /api/v1/runs/RUN), to 200 steps or more; every run's curve in curves.csv.
    python3 - "$sweep_out/sweep" <<'PY' || { cat "$sweep_out/sweep.txt"; echo "sweep.sh: not the table, the settings or the curves" >&2; return 1; }
import csv, json, re, sys
out = sys.argv[1]
summary = open(f"{out}/summary.md").read()
for lr in ("0.0005", "0.001"):
    assert re.search(rf"^\| dqn\.lr = {lr} \| \w+ \| .* \| [\d.]+ % \([\d.]+ to [\d.]+; 2 runs\) \| [\d,]+ \|$", summary, re.M), lr
    for seed in (1, 2):
        run = json.load(open(f"{out}/runs/lr-{lr.replace('.', '_')}-s{seed}/run.json"))
        s = run["settings"]
        assert (s["dqn"]["lr"], s["trainer"]["burn_in"]) == (float(lr), 1000), (run["name"], s["dqn"]["lr"], s["trainer"]["burn_in"])
        assert run["train_steps"] >= 200, (run["name"], run["train_steps"])
runs = {row["run"] for row in csv.DictReader(open(f"{out}/curves.csv"))}
assert runs == {f"lr-{lr}-s{seed}" for lr in ("0_0005", "0_001") for seed in (1, 2)}, runs
PY
    rm -rf "$sweep_out"
    SHINE_BIN=$debug python3 -m unittest discover -s scripts/tests
}
# A lane stops at its first failure (errexit does not reach into a function called in a
# condition, hence the explicit `set -e` in the subshell).
( set -e; lane=a; lane_a "$@" ) >"$lane_logs/a.log" 2>&1 &
pid_a=$!
( set -e; lane=b; lane_b "$@" ) >"$lane_logs/b.log" 2>&1 &
pid_b=$!
step "running two lanes: (a) the Slippi adapter, the Rust tests with tch and the GPU scripts, (b) the worker, the dashboard, the numerics under other instruction sets and the experiment presets"
status_a=0 status_b=0
wait "$pid_a" || status_a=$?
wait "$pid_b" || status_b=$?
for l in a b; do
    echo "==================== lane $l ====================" >&2
    cat "$lane_logs/$l.log" >&2
done
rm -rf "$lane_logs"
if (( status_a || status_b )); then
    step "failed: lane a exit status $status_a, lane b $status_b (their output is above)"
    exit 1
fi
step "all tests passed"
