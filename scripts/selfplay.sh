#!/usr/bin/env bash
# Self-play on this machine (docs/learning.md, "Self-play"): one manager with
# configs/selfplay.toml (a Fox run and a Marth run, each the other's opponent), one
# worker per run on the simulator; then each run's last model evaluated on 200 matches
# against the level-9 CPU (greedily) and against each other (each taking a random
# action 5 % of the time, eval's default for two models), beside the scripted CPU in
# Marth's place.
#
#   scripts/selfplay.sh [MINUTES] [--seconds S] [--seed N] [--data DIR] [--envs E]
#                       [--baseline MODEL] [--bin DIR]
#
#   MINUTES          training time (default 60)
#   --seconds S      training time in seconds instead (a short check)
#   --seed N         the Fox worker's seed (default 7; the Marth worker's is N + 1000)
#   --data DIR       where everything goes (default data/selfplay; emptied first)
#   --envs E         environments per worker (default 1)
#   --baseline MODEL a Fox model trained otherwise (scripts/learn.sh --config
#                    configs/fight.toml): also evaluated against the final Marth model
#   --bin DIR        shine-manager and shine-worker already built (default: release builds)
#
# Writes DIR/fox.safetensors, DIR/marth.safetensors, DIR/progress.log and DIR/result.txt.
set -euo pipefail
# Read whole before it runs: an edit while it runs changes nothing.
{
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=60 seconds= seed=7 data=data/selfplay envs=1 baseline= bin=
while (( $# )); do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        --envs) envs=$2; shift 2 ;;
        --baseline) baseline=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        [0-9]*) minutes=$1; shift ;;
        *) echo "selfplay.sh: unknown argument $1 (see scripts/selfplay.sh --help)" >&2; exit 2 ;;
    esac
done
[ -z "$baseline" ] || [ -f "$baseline" ] || { echo "selfplay.sh: no model file $baseline" >&2; exit 2; }
limit=${seconds:-$(( minutes * 60 ))}
episodes=${SHINE_EVAL_EPISODES:-200}
if [[ -z "$bin" ]]; then
    . scripts/env.sh
    cargo build --release -p shine-manager
    cargo build --release -p shine-worker
    bin=${CARGO_TARGET_DIR:-target}/release
fi
# Copied before the data directory is emptied: the baseline may live under it.
if [ -n "$baseline" ]; then
    keep=$(mktemp)
    cp "$baseline" "$keep"
fi
rm -rf "$data"
mkdir -p "$data/logs"
[ -z "$baseline" ] || mv "$keep" "$data/baseline-fox.safetensors"

port=8091
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
url="http://127.0.0.1:$port"
. scripts/manager-lib.sh
start_manager "$data/logs/manager.log" "$bin/shine-manager" --config configs/selfplay.toml --data-dir "$data" --token "$token"
i=0
for run in fox marth; do
    "$bin/shine-worker" run --manager "$url" --token "$token" --run "$run" --envs "$envs" --seed $(( seed + 1000 * i )) \
        --spool-dir "$data/spool-$run" --stats-file "$data/logs/worker-$run.json" >"$data/logs/worker-$run.log" 2>&1 &
    worker_pids+=($!)
    i=$(( i + 1 ))
done

echo "self-play for $(( limit / 60 )) min $(( limit % 60 )) s, configs/selfplay.toml, worker seeds $seed and $(( seed + 1000 )), $envs env(s) each (logs in $data/logs)" | tee "$data/progress.log"
start=$(date +%s)
tick=$(( limit < 60 ? limit : 60 ))
while (( $(date +%s) - start < limit )); do
    sleep "$tick"
    python3 - "$url" "$start" <<'PY' | tee -a "$data/progress.log" || true
import json, sys, time, urllib.request
line = [f"{(time.time() - int(sys.argv[2])) / 60:5.1f} min"]
for run in ("fox", "marth"):
    try:
        s = json.load(urllib.request.urlopen(f"{sys.argv[1]}/api/v1/runs/{run}/stats?since=9e99", timeout=20))["current"]
    except OSError as e:  # a busy manager: skip this line, the run goes on
        sys.exit(f"(no progress line: {e})")
    pct = lambda v: "-" if v is None else f"{100 * v:.0f} %"
    line.append(f"{run}: steps {s['train_steps']:>9,}  inserted {s['transitions_inserted']:>10,}  v{s['model_version']}  "
                f"training reward {s['episode_reward'] or 0:.2f}  evaluation (minute lasted) {pct(s['eval_survival'])}")
print(" | ".join(line), flush=True)
PY
done
elapsed=$(( $(date +%s) - start ))
for run in fox marth; do
    python3 -c "import urllib.request; open('$data/$run.safetensors','wb').write(urllib.request.urlopen('$url/api/v1/runs/$run/models/latest', timeout=60).read())"
done
cleanup
trap - EXIT INT TERM

{
    echo "self-play: $(( elapsed / 60 )) minutes (configs/selfplay.toml, worker seeds $seed and $(( seed + 1000 )), $envs env(s) each); $episodes matches each, seeds 1000000.."
    ev() { "$bin/shine-worker" eval --episodes "$episodes" "$@" 2>/dev/null; }
    ev --model "$data/fox.safetensors" --opponent cpu:9
    ev --model "$data/marth.safetensors" --opponent cpu:9
    "$bin/shine-worker" play --task fight --policy cpu --bot-level 9 --side marth --opponent cpu:9 --episodes "$episodes" --seed 1000000 --quiet 2>/dev/null
    ev --model "$data/fox.safetensors" --opponent "model:$data/marth.safetensors"
    [ -z "$baseline" ] || ev --model "$data/baseline-fox.safetensors" --opponent "model:$data/marth.safetensors"
} | tee "$data/result.txt"
exit
}
