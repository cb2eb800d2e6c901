#!/usr/bin/env bash
# The league's verdict on a self-play run (docs/learning.md, "Self-play"): a manager
# whose runs hold only the final models of scripts/selfplay.sh's two runs and of a Fox
# trained against the CPU alone (scripts/learn.sh --config configs/fight.toml), paused
# (nothing trains), with workers that play nothing but league matches; the table when
# the league has played enough.
#
#   scripts/selfplay-league.sh SELFPLAY_DIR BASELINE_DIR [--matches N] [--data DIR] [--bin DIR]
#
#   SELFPLAY_DIR     scripts/selfplay.sh's --data (runs fox and marth)
#   BASELINE_DIR     scripts/learn.sh's --data (run default, the fight task)
#   --matches N      league matches to play (default 600)
#   --data DIR       where the league manager keeps its data (default data/league; emptied)
#   --bin DIR        shine-manager and shine-worker already built (default: release builds)
#
# Players: fox (the self-play Fox), marth (the self-play Marth), fox-cpu (the Fox trained
# against the CPU), each run's final model, and the CPU at levels 1, 5 and 9. Writes
# DIR/league.json (GET /api/v1/league) and prints the table.
set -euo pipefail
{
cd "$(dirname "${BASH_SOURCE[0]}")/.."
selfplay= baseline= matches=600 data=data/league bin=
while (( $# )); do
    case $1 in
        --matches) matches=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) if [ -z "$selfplay" ]; then selfplay=$1; elif [ -z "$baseline" ]; then baseline=$1; else echo "selfplay-league.sh: unknown argument $1" >&2; exit 2; fi; shift ;;
    esac
done
[ -n "$selfplay" ] && [ -n "$baseline" ] || { echo "selfplay-league.sh: give SELFPLAY_DIR and BASELINE_DIR (see --help)" >&2; exit 2; }
if [[ -z "$bin" ]]; then
    . scripts/env.sh
    cargo build --release -p shine-manager
    cargo build --release -p shine-worker
    bin=${CARGO_TARGET_DIR:-target}/release
fi
rm -rf "$data"
# Each run: its checkpoint (so that the manager resumes it rather than publishing fresh
# weights) and its newest model file only.
take() {
    local from=$1 run=$2
    [ -f "$from/checkpoint/checkpoint.safetensors" ] || { echo "selfplay-league.sh: no checkpoint in $from" >&2; exit 2; }
    mkdir -p "$data/runs/$run/models"
    cp -r "$from/checkpoint" "$data/runs/$run/"
    local newest
    newest=$(ls "$from/models"/model-*.safetensors | sort | tail -n1)
    cp "$newest" "$data/runs/$run/models/"
    echo "$run: $(basename "$newest") from $from"
}
take "$selfplay/runs/fox" fox
take "$selfplay/runs/marth" marth
take "$baseline/runs/default" fox-cpu

port=8092
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
url="http://127.0.0.1:$port"
cat >"$data/manager.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
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
game = { side = "marth" }
[[runs]]
name = "fox-cpu"
paused = true
EOF
. scripts/manager-lib.sh
start_manager "$data/manager.log" "$bin/shine-manager" --config "$data/manager.toml" --data-dir "$data" --token "$token"
for i in 0 1; do
    "$bin/shine-worker" run --manager "$url" --token "$token" --run fox --envs 1 --seed $(( 100 + i )) --spool-dir "$data/spool-$i" >"$data/worker-$i.log" 2>&1 &
    worker_pids+=($!)
done
echo "playing $matches league matches (logs in $data)"
while :; do
    played=$(python3 -c "import json, urllib.request; print(json.load(urllib.request.urlopen('$url/api/v1/league', timeout=20))['matches'])" 2>/dev/null || echo 0)
    (( played >= matches )) && break
    sleep 10
done
python3 -c "import urllib.request; open('$data/league.json', 'wb').write(urllib.request.urlopen('$url/api/v1/league', timeout=20).read())"
cleanup
trap - EXIT INT TERM
python3 - "$data/league.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print(f"{t['matches']} matches")
print(f"{'player':<16}{'rating':>8}{'dev':>6}{'95 % interval':>18}{'matches':>9}  won-drawn-lost")
for p in t["players"]:
    name = p["player"] + ("" if p["cpu"] is not None else f" ({p['side']})")
    print(f"{name:<16}{p['rating']:>8.0f}{p['deviation']:>6.0f}{p['low']:>10.0f}-{p['high']:<7.0f}{p['matches']:>9}  {p['won']}-{p['drawn']}-{p['lost']}")
names = t["head_to_head_players"]
print("\nhead to head (row's win rate against column, matches):")
for name, row in zip(names, t["head_to_head"]):
    cells = ["" if c is None else f"{100 * c['win_rate']:.0f} % ({c['matches']})" for c in row]
    print(f"{name:<12}" + "".join(f"{c:>14}" for c in cells))
print(" " * 12 + "".join(f"{n:>14}" for n in names))
PY
exit
}
