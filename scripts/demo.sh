#!/usr/bin/env bash
# The demo: one shine-manager and two shine-worker processes on the embedded simulator,
# talking real HTTP on loopback; prints the dashboard's URL and a progress line every
# few seconds. Ctrl-C stops everything cleanly (the manager checkpoints; run the demo
# again and it resumes).
#
#   scripts/demo.sh            (SHINE_DEMO_PORT=8080, SHINE_DEMO_WORKERS=2)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
port=${SHINE_DEMO_PORT:-8080}
workers=${SHINE_DEMO_WORKERS:-2}
data=${SHINE_DEMO_DIR:-data/demo}

. scripts/env.sh
echo "==> building shine-manager and shine-worker (release; the first build takes a few minutes)" >&2
cargo build --release -p shine-manager
# A cargo run of its own, so the worker is built without libtorch, as users get it.
cargo build --release -p shine-worker
bin=${CARGO_TARGET_DIR:-target}/release

mkdir -p "$data/logs"
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
url="http://127.0.0.1:$port"
pids=()
stop() {
    trap - INT TERM EXIT
    echo >&2
    echo "==> stopping workers, then the manager (it writes a checkpoint)" >&2
    for pid in "${pids[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]:1}"; do wait "$pid" 2>/dev/null || true; done
    kill -TERM "${pids[0]}" 2>/dev/null || true
    wait "${pids[0]}" 2>/dev/null || true
    echo "==> stopped; logs in $data/logs, models in $data/models" >&2
}
trap stop INT TERM EXIT

"$bin/shine-manager" --config configs/demo.toml --listen "127.0.0.1:$port" --data-dir "$data" --token "$token" \
    >"$data/logs/manager.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('$url/healthz', timeout=1)" 2>/dev/null; then break; fi
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
        echo "error: shine-manager exited; its log:" >&2
        tail -n 20 "$data/logs/manager.log" >&2
        exit 1
    fi
    sleep 0.2
done

for i in $(seq 1 "$workers"); do
    "$bin/shine-worker" run --manager "$url" --token "$token" --envs 1 --seed "$i" \
        --spool-dir "$data/spool-$i" >"$data/logs/worker-$i.log" 2>&1 &
    pids+=($!)
done

echo
echo "  Shine demo: manager and $workers workers on the embedded simulator"
echo "  Dashboard:  $url/"
echo "  Logs:       $data/logs/   (Ctrl-C stops everything)"
echo
while sleep 5; do
    for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null || { echo "error: a process exited; see $data/logs" >&2; exit 1; }
    done
    python3 - "$url" <<'PY' || true
import json, sys, urllib.request
try:
    s = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/stats?since=9e99", timeout=10))["current"]
except OSError as e:  # a busy manager (2 cores shared with the workers): next time
    sys.exit(f"(no progress line: {e})")
pct = lambda v: "-" if v is None else f"{100 * v:.0f} %"
print(f"inserted {s['transitions_inserted']:>9,}  train steps {s['train_steps']:>8,} ({s['train_steps_per_sec']:.0f}/s)  "
      f"model v{s['model_version']:<4} workers {s['workers']}  survival: training {pct(s['train_survival'])}, evaluation {pct(s['eval_survival'])}",
      flush=True)
PY
done
