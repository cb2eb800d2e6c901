#!/usr/bin/env bash
# Proof that Shine learns: train for N minutes on this machine (one manager, one
# worker on the simulator), then evaluate the trained bot greedily against the level-9
# CPU over 200 episodes, beside the idle, random and dodge baselines on the same seeds.
#
#   scripts/learn.sh [MINUTES]      (default 30)
#
# Writes data/learn/curve.csv (evaluation survival against training time, from the
# manager's stats) and data/learn/result.txt; docs/learning.md records a run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=${1:-30}
data=data/learn
port=8090
episodes=${SHINE_EVAL_EPISODES:-200}

. scripts/env.sh
cargo build --release -p shine-manager
cargo build --release -p shine-worker
bin=${CARGO_TARGET_DIR:-target}/release

rm -rf "$data"
mkdir -p "$data/logs"
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
url="http://127.0.0.1:$port"
"$bin/shine-manager" --config configs/learn.toml --data-dir "$data" --token "$token" >"$data/logs/manager.log" 2>&1 &
manager=$!
worker=
cleanup() {
    [ -n "$worker" ] && kill -TERM "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
    kill -TERM "$manager" 2>/dev/null && wait "$manager" 2>/dev/null
    true
}
trap cleanup EXIT INT TERM
for _ in $(seq 1 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('$url/healthz', timeout=1)" 2>/dev/null && break
    sleep 0.2
done
"$bin/shine-worker" run --manager "$url" --token "$token" --envs 1 --seed 7 --spool-dir "$data/spool" >"$data/logs/worker.log" 2>&1 &
worker=$!

echo "training for $minutes minutes (logs in $data/logs)"
start=$(date +%s)
while (( $(date +%s) - start < minutes * 60 )); do
    sleep 60
    python3 - "$url" "$start" <<'PY' || true
import json, sys, time, urllib.request
try:
    s = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/stats?since=9e99", timeout=20))["current"]
except OSError as e:  # a busy manager: skip this line, the run goes on
    sys.exit(f"(no progress line: {e})")
pct = lambda v: "-" if v is None else f"{100 * v:.0f} %"
print(f"{(time.time() - int(sys.argv[2])) / 60:5.1f} min  steps {s['train_steps']:>9,}  inserted {s['transitions_inserted']:>10,}  "
      f"model v{s['model_version']}  loss {s['loss'] or 0:.4f}  survival: training {pct(s['train_survival'])}, evaluation {pct(s['eval_survival'])}", flush=True)
PY
done

# The learning curve, from the manager's own time series.
python3 - "$url" "$start" "$data/curve.csv" <<'PY'
import json, sys, urllib.request
stats = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/stats", timeout=60))
with open(sys.argv[3], "w") as f:
    f.write("minutes,train_steps,transitions_inserted,model_version,eval_survival,train_survival\n")
    for s in stats["series"]:
        f.write(f"{(s['t'] - int(sys.argv[2])) / 60:.2f},{s['train_steps']},{s['transitions_inserted']},{s['model_version']},"
                f"{'' if s['eval_survival'] is None else s['eval_survival']},{'' if s['train_survival'] is None else s['train_survival']}\n")
PY
python3 -c "import urllib.request; open('$data/final.safetensors','wb').write(urllib.request.urlopen('$url/api/v1/models/latest', timeout=60).read())"
cleanup
trap - EXIT INT TERM

{
    echo "training: $minutes minutes; evaluation: $episodes episodes at CPU level 9, seeds 1000000.."
    "$bin/shine-worker" eval --model "$data/final.safetensors" --episodes "$episodes" --cpu-level 9 2>/dev/null
    for p in idle random dodge; do
        "$bin/shine-worker" play --policy $p --episodes "$episodes" --cpu-level 9 --seed 1000000 --quiet 2>/dev/null
    done
} | tee "$data/result.txt"
