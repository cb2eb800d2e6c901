#!/usr/bin/env bash
# Proof that Shine learns: train for N minutes on this machine (one manager, one
# worker on the simulator), then evaluate the trained bot greedily against the level-9
# CPU over 200 episodes, beside baselines on the same seeds: idle, random and dodge
# for the Untouchable task; idle, random and the simulator's CPU in the bot's place
# at levels 1 and 9 for the fight.
#
#   scripts/learn.sh [MINUTES] [--config FILE] [--seed N] [--prioritized] [--stop-at FRACTION] [--data DIR]
#                    [--seconds S] [--stop-at-steps N] [--device D] [--workers N] [--envs E] [--bin DIR]
#                    [--no-baselines]
#
#   MINUTES          training time (default 30)
#   --seconds S      training time in seconds instead (a short check)
#   --config FILE    the manager's config (default configs/learn.toml; configs/fight.toml
#                    trains the fight task)
#   --seed N         the worker's seed (default 7): its matches and its exploration
#   --prioritized    [replay] sampling = "prioritized" on top of the config
#   --stop-at F      stop training early once the manager's evaluation window reaches
#                    F (0.9 = 90 % survival), checked every minute
#   --stop-at-steps N  stop training once the manager's stats count N train steps
#                    (checked every 2 s; the stats count in steps of the config's
#                    [trainer] stats_every): a check that every part ran, whatever the
#                    machine's speed, with MINUTES or --seconds as the limit a hang reaches
#   --data DIR       where everything goes (default data/learn; emptied first)
#   --device D       the manager's training device (shine-manager --device: auto, cpu,
#                    cuda, cuda:N; default: the config's)
#   --workers N      worker processes (default 1); worker i plays with seed SEED + 1000 i
#   --envs E         environments per worker (shine-worker --envs: a number or auto; 1)
#   --bin DIR        shine-manager and shine-worker already built (default: release builds)
#   --no-baselines   evaluate the trained bot only (no idle, random, dodge or CPU rows)
#
# Writes DIR/curve.csv (evaluation survival against training time, from the manager's
# stats and history: its window, and the models of the last minute) and DIR/result.txt;
# docs/learning.md records runs. scripts/learn-seeds.sh runs several seeds back to back.
set -euo pipefail
# The whole script is one block, read before it runs: a checkout or an edit while a
# run goes on (it takes half an hour or more) does not change what it does.
{
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=30 seconds= seed=7 prioritized= stop_at= stop_steps= data=data/learn base=configs/learn.toml
device= workers=1 envs=1 bin= baselines=1
while (( $# )); do
    case $1 in
        --config) base=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --prioritized) prioritized=1; shift ;;
        --stop-at) stop_at=$2; shift 2 ;;
        --stop-at-steps) stop_steps=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --device) device=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --envs) envs=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --no-baselines) baselines=; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        [0-9]*) minutes=$1; shift ;;
        *) echo "learn.sh: unknown argument $1 (see scripts/learn.sh --help)" >&2; exit 2 ;;
    esac
done
port=8090
episodes=${SHINE_EVAL_EPISODES:-200}
[ -f "$base" ] || { echo "learn.sh: no config file $base" >&2; exit 2; }
if [ -n "$prioritized" ] && grep -q '^\[replay\]' "$base"; then
    echo "learn.sh: --prioritized adds a [replay] table, but $base has one: set sampling = \"prioritized\" there instead" >&2
    exit 2
fi
task=$(sed -n 's/^task *= *"\(.*\)".*/\1/p' "$base" | head -1)
task=${task:-untouchable}

[[ -z $stop_steps || $stop_steps =~ ^[1-9][0-9]*$ ]] || { echo "learn.sh: --stop-at-steps takes a number of train steps, not $stop_steps" >&2; exit 2; }
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "learn.sh: --workers takes a number of worker processes, not $workers" >&2; exit 2; }
limit=${seconds:-$(( minutes * 60 ))}
if [[ -z "$bin" ]]; then
    . scripts/env.sh
    cargo build --release -p shine-manager
    cargo build --release -p shine-worker
    bin=${CARGO_TARGET_DIR:-target}/release
fi

rm -rf "$data"
mkdir -p "$data/logs"
config=$base
if [ -n "$prioritized" ]; then
    # The config has no [replay] table (checked above): one appended is the only change.
    config=$data/manager.toml
    { cat "$base"; printf '\n[replay]\nsampling = "prioritized"\n'; } >"$config"
fi
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
url="http://127.0.0.1:$port"
. scripts/manager-lib.sh
start_manager "$data/logs/manager.log" "$bin/shine-manager" --config "$config" --data-dir "$data" --token "$token" ${device:+--device "$device"}
for (( i = 0; i < workers; i++ )); do
    # The first worker's log keeps its old name (docs/learning.md cites worker.log).
    log=$data/logs/worker.log
    (( i > 0 )) && log=$data/logs/worker-$i.log
    "$bin/shine-worker" run --manager "$url" --token "$token" --envs "$envs" --seed $(( seed + 1000 * i )) --spool-dir "$data/spool-$i" >"$log" 2>&1 &
    worker_pids+=($!)
done

echo "training for $(( limit / 60 )) min $(( limit % 60 )) s${stop_at:+ (or until the evaluation window reaches $stop_at)}${stop_steps:+ (or until $stop_steps train steps)}, $base, task $task, worker seed $seed, $workers worker(s) x $envs env(s)${device:+, device $device}${prioritized:+, prioritized replay} (logs in $data/logs)"
start=$(date +%s)
tick=$(( limit < 60 ? limit : 60 ))
# A count to stop at is looked for every 2 s (with a progress line each time).
[[ -n $stop_steps ]] && tick=2
while (( $(date +%s) - start < limit )); do
    sleep "$tick"
    # Exit status 3: the evaluation window reached --stop-at; 4: --stop-at-steps reached.
    rc=0
    python3 - "$url" "$start" "$stop_at" "$stop_steps" <<'PY' || rc=$?
import json, sys, time, urllib.request
try:
    s = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/stats?since=9e99", timeout=20))["current"]
except OSError as e:  # a busy manager: skip this line, the run goes on
    sys.exit(f"(no progress line: {e})")
pct = lambda v: "-" if v is None else f"{100 * v:.0f} %"
print(f"{(time.time() - int(sys.argv[2])) / 60:5.1f} min  steps {s['train_steps']:>9,}  inserted {s['transitions_inserted']:>10,}  "
      f"model v{s['model_version']}  loss {s['loss'] or 0:.4f}  training reward {s['episode_reward'] or 0:.2f}  survival: training {pct(s['train_survival'])}, evaluation {pct(s['eval_survival'])}", flush=True)
if sys.argv[3] and s["eval_survival"] is not None and s["eval_survival"] >= float(sys.argv[3]):
    sys.exit(3)
if sys.argv[4] and s["train_steps"] >= int(sys.argv[4]):
    sys.exit(4)
PY
    if (( rc == 3 )); then
        echo "the evaluation window reached $stop_at: training stops here"
        break
    fi
    if (( rc == 4 )); then
        echo "the manager counted $stop_steps train steps: training stops here"
        break
    fi
done
elapsed=$(( $(date +%s) - start ))
trained=$(( elapsed / 60 ))
# The learner's and the fleet's rates over the whole run, from the manager's counters.
rates=$(python3 - "$url" "$elapsed" <<'PY'
import json, sys, urllib.request
c = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/stats?since=9e99", timeout=20))["current"]
secs = max(float(sys.argv[2]), 1.0)
print(f"rates: {c['train_steps'] / secs:.0f} train steps/s, {c['transitions_inserted'] / secs:.0f} transitions/s inserted ({c['train_steps']:,} steps, {c['transitions_inserted']:,} transitions in {secs:.0f} s)")
PY
)

# The learning curve, from the manager's own time series. eval_survival is the manager's
# window (its last [stats] recent_episodes = 1,000 evaluation episodes), which spans
# several minutes of models and so trails the models' own level; minute_eval_survival is
# the evaluation episodes of the models published in the 60 s before the sample (each
# model's record, from the history; blank under 20 episodes): noisier, without the lag.
python3 - "$url" "$start" "$data/curve.csv" <<'PY'
import bisect, json, sys, urllib.request
history = json.load(urllib.request.urlopen(sys.argv[1] + "/api/v1/history/default?max_points=100000", timeout=60))
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
with open(sys.argv[3], "w") as f:
    f.write("minutes,train_steps,transitions_inserted,model_version,eval_survival,minute_eval_survival,train_survival,episode_reward\n")
    blank = lambda v: "" if v is None else v
    for i, s in enumerate(series):
        f.write(f"{(s['t'] - int(sys.argv[2])) / 60:.2f},{s['train_steps']},{s['transitions_inserted']},{s['model_version']},"
                f"{blank(s['eval_survival'])},{blank(minute_eval(i))},{blank(s['train_survival'])},{blank(s['episode_reward'])}\n")
PY
python3 -c "import urllib.request; open('$data/final.safetensors','wb').write(urllib.request.urlopen('$url/api/v1/models/latest', timeout=60).read())"
cleanup
trap - EXIT INT TERM

{
    echo "training: $trained minutes ($base, task $task, worker seed $seed, $workers worker(s) x $envs env(s)${device:+, device $device}${prioritized:+, prioritized replay}); evaluation: $episodes episodes at CPU level 9, seeds 1000000.."
    echo "$rates"
    python3 - "$data/curve.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def first(column):
    r = next((r for r in rows if r[column] and float(r[column]) >= 0.9), None)
    return f"minute {float(r['minutes']):.1f} ({int(r['train_steps']):,} steps)" if r else "never"
print(f"first at 90 % survival: the evaluation window at {first('eval_survival')}, the last minute's models at {first('minute_eval_survival')}")
PY
    "$bin/shine-worker" eval --model "$data/final.safetensors" --task "$task" --episodes "$episodes" --cpu-level 9 2>/dev/null
    baseline() { "$bin/shine-worker" play --task "$task" "$@" --episodes "$episodes" --cpu-level 9 --seed 1000000 --quiet 2>/dev/null; }
    if [ -z "$baselines" ]; then
        :
    elif [ "$task" = fight ]; then
        baseline --policy idle
        baseline --policy random
        baseline --policy cpu --bot-level 1
        baseline --policy cpu --bot-level 9
    else
        baseline --policy idle
        baseline --policy random
        baseline --policy dodge
    fi
} | tee "$data/result.txt"
exit
}
