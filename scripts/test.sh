#!/usr/bin/env bash
# Shine's test command (the README's): sets up what is missing, then runs every test.
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
# libmelee and numpy for the Slippi adapter (python/shine_bot): its own tests, and
# agent/tests/slippi_replay.rs, which runs it on a real replay.
SHINE_PYTHON=$(scripts/setup-python.sh)
export SHINE_PYTHON

echo "==> tests: the Slippi adapter (python/shine_bot)" >&2
"$SHINE_PYTHON" -m unittest discover -s python/tests
echo "==> tests: bridge, agent (with tch), manager" >&2
cargo test --workspace --exclude shine-worker "$@"
# The worker's end-to-end tests start the real manager binary (worker/tests/e2e.rs).
cargo build -p shine-manager
echo "==> tests: worker (built without libtorch)" >&2
cargo test -p shine-worker "$@"
echo "==> tests: the GPU scripts in their CPU form (a GPU machine runs them for real)" >&2
cargo build -p shine-manager --example replay_bench
debug=${CARGO_TARGET_DIR:-target}/debug
gpu_out=$(mktemp -d)
OUT=$gpu_out/check scripts/gpu-check.sh --device cpu --small --bin "$debug" >"$gpu_out/check.md"
# Every table the script gathers is there: the add cost, the train step, PyTorch, the runs.
for want in '^Adding one experience' '^Train step' '^| 128 | eager |' '^ *2 2 managers'; do
    grep -q -- "$want" "$gpu_out/check.md" || { cat "$gpu_out/check.md"; echo "gpu-check.sh: no line matching $want" >&2; exit 1; }
done
OUT=$gpu_out/learn scripts/gpu-learn.sh --device cpu --seeds 1 --seconds 40 --workers 2 --bin "$debug" --eval-episodes 4 --no-baselines >"$gpu_out/learn.md"
# One seed trained (steps and transitions counted) and evaluated.
grep -qE '^\| 1 \| 0 \| .* \| v[0-9]+: [0-9.]+ % \([0-9]+/4\).* \| [1-9][0-9]* \| [1-9][0-9]* \|$' "$gpu_out/learn.md" || { cat "$gpu_out/learn.md"; echo "gpu-learn.sh: no row for seed 1" >&2; exit 1; }
rm -rf "$gpu_out"

echo "==> tests: the dashboard in headless Chromium" >&2
scripts/browser-test.sh
# (after the browser test, which installs Node.js where it is missing)
echo "==> tests: the dashboard's modules (node --test)" >&2
node --test web/tests/unit/
