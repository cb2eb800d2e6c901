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
pids=()     # the manager, then the workers
aux=()      # the monitor loop's sleep and progress line
# Ctrl-C: the terminal sends SIGINT to its foreground process group. The manager and the
# workers run in process groups of their own (started under `set -m`), so it reaches only
# this script, which stops them in order: the workers first (they hand over their last
# transitions), then the manager (SIGTERM: it writes a checkpoint). Had they shared the
# SIGINT, the workers would exit on their own and the monitor below would take that for
# a crash. The loop's own helpers run in the background, where a non-interactive shell
# ignores SIGINT for them, so `wait` returns and the trap runs at once.
stop() {
    # Stop to the end whatever happens: an echo to a terminal that has gone fails.
    set +e
    trap - EXIT
    # A second Ctrl-C while stopping: signal whoever is left again (they quit at once).
    # The terminal closing (SIGHUP) must not cut the stop short and leave the manager
    # running without its checkpoint.
    trap 'for pid in "${pids[@]}"; do [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null; done' INT TERM
    trap '' HUP
    for pid in "${aux[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    [ ${#pids[@]} -gt 0 ] || return 0
    echo >&2
    # (An empty entry: that process has exited already, reported by the loop below.)
    if [ -n "${pids[0]}" ]; then
        echo "==> stopping workers, then the manager (it writes a checkpoint)" >&2
    else
        echo "==> stopping workers" >&2
    fi
    for pid in "${pids[@]:1}"; do [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null; done
    for pid in "${pids[@]:1}"; do [ -z "$pid" ] || reap "$pid"; done
    if [ -n "${pids[0]}" ]; then
        kill -TERM "${pids[0]}" 2>/dev/null
        reap "${pids[0]}"
        local status=$?
        if [ "$status" -ne 0 ]; then
            echo "error: shine-manager exited with status $status while stopping; see $data/logs/manager.log" >&2
            return 1
        fi
    fi
    echo "==> stopped; logs in $data/logs, models in $data/runs/default/models" >&2
}
# wait PID, again when a trap interrupted it; returns its exit status.
reap() {
    local s=0
    wait "$1" 2>/dev/null || s=$?
    while [ "$s" -gt 128 ] && kill -0 "$1" 2>/dev/null; do
        s=0
        wait "$1" 2>/dev/null || s=$?
    done
    return "$s"
}
on_signal() {
    stop || true
    exit "$((128 + $1))"
}
trap 'on_signal 2' INT
trap 'on_signal 15' TERM
trap 'on_signal 1' HUP
trap stop EXIT

set -m # a process group of their own for what starts here (see above)
"$bin/shine-manager" --config configs/demo.toml --listen "127.0.0.1:$port" --data-dir "$data" --token "$token" \
    >"$data/logs/manager.log" 2>&1 &
pids+=($!)
set +m
# Until it answers; if it exits instead, the harness prints its log's end.
if ! python3 scripts/harness.py wait-manager --pid "${pids[0]}" --log "$data/logs/manager.log" --url "$url" >/dev/null; then
    kill -0 "${pids[0]}" 2>/dev/null || pids=()
    exit 1
fi

set -m
for i in $(seq 1 "$workers"); do
    "$bin/shine-worker" run --manager "$url" --token "$token" --envs 1 --seed "$i" \
        --spool-dir "$data/spool-$i" >"$data/logs/worker-$i.log" 2>&1 &
    pids+=($!)
done
set +m

echo
echo "  Shine demo: manager and $workers workers on the embedded simulator"
echo "  Dashboard:  $url/"
echo "  Logs:       $data/logs/   (Ctrl-C stops everything)"
echo
while true; do
    sleep 5 &
    aux=($!)
    wait "${aux[0]}" || true
    # A process that exits on its own (Ctrl-C never reaches them, see above) is an error.
    for i in "${!pids[@]}"; do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            status=0
            reap "${pids[$i]}" || status=$?
            pids[i]=
            name=shine-manager log=manager.log
            [ "$i" -eq 0 ] || name="shine-worker $i" log=worker-$i.log
            echo "error: $name exited (status $status); see $data/logs/$log" >&2
            exit 1
        fi
    done
    python3 - "$url" <<'PY' &
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
    aux=($!)
    wait "${aux[0]}" || true
done
