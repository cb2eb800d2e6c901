#!/usr/bin/env bash
# The learning run with a GPU learner and a fleet on the same machine: one manager on
# CUDA, as many workers as leave it a core or two, seeds back to back, each stopped once
# its evaluation window reaches --stop-at or at a hard limit; then the table of how
# each learned (docs/learning.md, "On a GPU machine"). The same command runs on a
# machine without a GPU (--device cpu, fewer workers, a shorter limit); CI runs it so in
# a small form.
#
#   scripts/gpu-learn.sh [--device cuda|cpu] [--seeds "1 2 3"] [--minutes M | --seconds S]
#                        [--workers N|auto] [--envs E|auto] [--config FILE] [--stop-at F]
#                        [--stop-at-steps N] [--bin DIR] [--eval-episodes N] [--no-baselines]
#
#   --device D       the manager's device (default cuda when nvidia-smi sees a GPU, else cpu)
#   --seeds LIST     worker seeds, one run each (default "1 2 3")
#   --minutes M      the hard limit of each seed (default 4); --seconds S instead
#   --workers N      worker processes (default auto: the cores less two, at least one)
#   --envs E         environments per worker (default 1; auto lets each worker search)
#   --config FILE    the manager's config (default configs/learn-gpu.toml)
#   --stop-at F      stop a seed once its evaluation window reaches F (default 0.9)
#   --stop-at-steps N  stop a seed once the manager counts N train steps (CI's check that
#                    every part runs, on a machine of any speed: learn.sh --stop-at-steps)
#   --bin DIR        prebuilt shine-manager and shine-worker (default: release builds)
#   --eval-episodes N  the final model's evaluation at level 9 (default 200)
#   --no-baselines   no idle, random or dodge rows (each seed's evaluation only)
#
# Each seed's curve, result and logs go to $OUT/seed-N/ (default OUT=data/gpu-learn),
# the table to $OUT/summary.md and, last, to the terminal.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
device= seeds="1 2 3" minutes=4 seconds= workers=auto envs=1 config=configs/learn-gpu.toml stop_at=0.9 bin= episodes=200 pass=()
while (( $# )); do
    case $1 in
        --device) device=$2; shift 2 ;;
        --seeds) seeds=$2; shift 2 ;;
        --minutes) minutes=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --envs) envs=$2; shift 2 ;;
        --config) config=$2; shift 2 ;;
        --stop-at) stop_at=$2; shift 2 ;;
        --stop-at-steps) pass+=(--stop-at-steps "$2"); shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --eval-episodes) episodes=$2; shift 2 ;;
        --no-baselines) pass+=(--no-baselines); shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-learn.sh: unknown argument $1 (see scripts/gpu-learn.sh --help)" >&2; exit 2 ;;
    esac
done
if [[ -z "$device" ]]; then
    if nvidia-smi -L >/dev/null 2>&1; then device=cuda; else device=cpu; fi
fi
if [[ $workers == auto ]]; then
    workers=$(( $(nproc) - 2 ))
    (( workers >= 1 )) || workers=1
fi
out=${OUT:-data/gpu-learn}
mkdir -p "$out"
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
    [[ $device == cuda* ]] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    if [[ -n "$seconds" ]]; then per_seed="$seconds s"; else per_seed="$minutes min"; fi
    echo "device $device, $workers worker(s) x $envs env(s), $config, stop at $stop_at, at most $per_seed a seed"
} | tee "$out/machine.txt"

limit=(--minutes "$minutes")
[[ -n "$seconds" ]] && limit=(--seconds "$seconds")
SHINE_EVAL_EPISODES=$episodes scripts/learn-seeds.sh "${limit[@]}" --config "$config" --stop-at "$stop_at" --out "$out" --label "gpu-learn ($device)" \
    --device "$device" --workers "$workers" --envs "$envs" ${bin:+--bin "$bin"} "${pass[@]}" $seeds >"$out/learn-seeds.log" 2>&1 || {
    tail -n 40 "$out/learn-seeds.log" >&2
    echo "gpu-learn.sh: a seed failed; its logs are under $out" >&2
    exit 1
}
cat "$out/summary.md"
