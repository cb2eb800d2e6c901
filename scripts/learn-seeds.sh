#!/usr/bin/env bash
# Several seeds of scripts/learn.sh, back to back, and one table of how each learned:
# the minute at which the manager's evaluation window first reached 90 % survival, and
# the minute at which the models published in the last minute did (the window trails
# them: docs/learning.md), with the train steps by then, and the final model's
# 200-episode survival at level 9; then the medians and the spread (min-max) over the
# seeds.
#
#   scripts/learn-seeds.sh [--minutes M] [--config FILE] [--prioritized] [--stop-at F] [--label NAME] [--out DIR]
#                          [learn.sh's --seconds S --stop-at-steps N --device D --workers N --envs E --bin DIR
#                          --no-baselines] SEED...
#
#   --minutes M      training time of each seed (default 30)
#   --config FILE    the manager's config (learn.sh --config; default configs/learn.toml)
#   --prioritized    prioritized replay (learn.sh --prioritized)
#   --stop-at F      stop each seed once its evaluation window reaches F (learn.sh
#                    --stop-at): the minute measurement without the rest of the half hour
#   --label NAME     data/learn-seeds/NAME/seed-N/ holds each run (default uniform or
#                    prioritized)
#   --out DIR        hold the runs in DIR/seed-N/ instead
#   --seconds, --stop-at-steps, --device, --workers, --envs, --bin, --no-baselines: passed
#                    to learn.sh
#
# Runs take the whole machine one after the other; nothing else should run meanwhile
# (minutes are wall-clock: another load slows the learner). The table is printed and
# written to data/learn-seeds/NAME/summary.md.
set -euo pipefail
# The whole script is one block, read before it runs: a checkout or an edit while a
# run goes on (it takes half an hour or more) does not change what it does.
{
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=30 config= prioritized= stop_at= label= out= seeds=() pass=()
while (( $# )); do
    case $1 in
        --minutes) minutes=$2; shift 2 ;;
        --config) config=$2; shift 2 ;;
        --prioritized) prioritized=--prioritized; shift ;;
        --stop-at) stop_at=$2; shift 2 ;;
        --label) label=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --seconds) minutes=$(python3 -c "print(round($2 / 60, 2))"); pass+=("$1" "$2"); shift 2 ;;
        --stop-at-steps|--device|--workers|--envs|--bin) pass+=("$1" "$2"); shift 2 ;;
        --no-baselines) pass+=("$1"); shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        [0-9]*) seeds+=("$1"); shift ;;
        *) echo "learn-seeds.sh: unknown argument $1 (see scripts/learn-seeds.sh --help)" >&2; exit 2 ;;
    esac
done
(( ${#seeds[@]} )) || { echo "learn-seeds.sh: name at least one seed, e.g. scripts/learn-seeds.sh 1 2 3" >&2; exit 2; }
label=${label:-$([ -n "$prioritized" ] && echo prioritized || echo uniform)}
out=${out:-data/learn-seeds/$label}
mkdir -p "$out"

for s in "${seeds[@]}"; do
    echo "=== seed $s ($label) ==="
    scripts/learn.sh "$minutes" --seed "$s" ${config:+--config "$config"} $prioritized ${stop_at:+--stop-at "$stop_at"} --data "$out/seed-$s" "${pass[@]}"
done

python3 - "$out" "$label" "$minutes" "$stop_at" "${seeds[@]}" <<'PY' | tee "$out/summary.md"
import csv, re, statistics, sys
out, label, minutes, stop_at, seeds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
rows, firsts, models_firsts = [], [], []
for s in seeds:
    d = f"{out}/seed-{s}"
    with open(f"{d}/curve.csv") as f:
        curve = list(csv.DictReader(f))
    def crossing(column):
        r = next((r for r in curve if r.get(column) and float(r[column]) >= 0.9), None)
        return (float(r["minutes"]), int(r["train_steps"])) if r else None
    first, models_first = crossing("eval_survival"), crossing("minute_eval_survival")
    text = open(f"{d}/result.txt").read()
    m = re.search(r"^model v(\d+), CPU level 9: full-minute survival ([\d.]+) % \((\d+)/(\d+)\), 95 % interval ([\d.]+-[\d.]+) %", text, re.M)
    trained = re.search(r"^training: (\d+) minutes", text, re.M).group(1)
    final = f"v{m.group(1)}: {m.group(2)} % ({m.group(3)}/{m.group(4)}), {m.group(5)} %" if m else "(no evaluation)"
    r = re.search(r"^rates: (\d+) train steps/s, (\d+) transitions/s", text, re.M)
    rates = (r.group(1), r.group(2)) if r else ("-", "-")
    rows.append((s, trained, first, models_first, final, bool(m) and float(m.group(2)) >= 90.0, rates))
    firsts.append(first)
    models_firsts.append(models_first)
print(f"## {label}: {len(seeds)} seeds of scripts/learn.sh {minutes}{' --stop-at ' + stop_at if stop_at else ''}\n")
print("| worker seed | trained (min) | evaluation window first >= 90 % | last minute's models first >= 90 % | final model at level 9 (greedy, seeds 1,000,000..) | train steps/s | transitions/s |")
print("|---:|---:|---|---|---|---:|---:|")
when = lambda first: f"minute {first[0]:.1f} ({first[1]:,} steps)" if first else "never"
for s, trained, first, models_first, final, _, (sps, tps) in rows:
    print(f"| {s} | {trained} | {when(first)} | {when(models_first)} | {final} | {sps} | {tps} |")
reached = sum(1 for r in rows if r[5])
print(f"\nfinal model >= 90 %: {reached} of {len(rows)} seeds")
# A seed that never got there counts as later than any that did.
never = float("inf")
show = lambda m: f"after {minutes}" if m == never else f"{m:.1f}"
for what, got in [("evaluation window", firsts), ("last minute's models", models_firsts)]:
    all_minutes = sorted(f[0] if f else never for f in got)
    print(f"{what} first >= 90 %: median minute {show(statistics.median_low(all_minutes))}, "
          f"spread {show(all_minutes[0])} to {show(all_minutes[-1])} ({sum(1 for f in got if f)} of {len(got)} seeds got there)")
PY
exit
}
