#!/usr/bin/env bash
# Every GPU measurement of docs/benchmarks.md in one command, for a lent GPU machine
# (one device call), and the same on a CPU in small sizes (CI keeps it working).
#
#   scripts/gpu-check.sh [--device cuda|cpu] [--small] [--bin DIR] [--python PY]
#
#   --device D   cuda (default): the checks and the figures on the GPU; cpu: the same
#                steps on the CPU (no graph rows)
#   --small      small sizes (a 20,000-row replay, a few steps, k = 1 and 2 runs): a
#                check that every step runs, not figures to report
#   --bin DIR    prebuilt binaries: DIR/shine-manager, DIR/shine-worker and
#                DIR/replay_bench (or DIR/examples/replay_bench); default: release
#                builds here
#   --python PY  the python with PyTorch for the PyTorch yardstick (default: .venv's, or
#                python3 on a machine without .venv, e.g. a GPU machine's own)
#   --tests BIN  also run the manager library's ignored GPU tests (a run's trainer
#                replaying graphs and re-capturing them) from its test binary, built with
#                `cargo test --release -p shine-manager --lib --no-run`
#
# In order, each step's full output under $OUT (default data/gpu-check), a table last:
#   1. the machine: nvidia-smi (card, driver, clocks) or lscpu; the commit
#   2. the device as shine-manager's code sees it (--device cuda fails here, clearly,
#      without CUDA)
#   3. replay_bench: Parr's Figure 3 (adding one experience, update sizes 1 to 10,000)
#      and Table 1 (train step at batch 16 to 256, device replay against in-RAM,
#      uniform and prioritized); k = 1, 2, 4, 8 runs as one grouped step against k
#      steps in turn; on CUDA also the graph step and the grouped graph step checked
#      equal to their eager forms over 20 steps, the step eager against one graph
#      replay with its kernel count and the card's per-kernel launch floor, and the
#      kernels of one captured step by name (the graph itself in train-step-graph.dot)
#   3b. on CUDA, where Nsight Compute (ncu) is installed: every kernel of exactly one
#      graph replay of the train step (batch 32; the profiler is on around that replay
#      alone), each with its time and its share of the step, the longest first
#   4. the same update in PyTorch (scripts/torch_step_bench.py): eager, and with
#      torch.compile(mode="reduce-overhead") on CUDA
#   5. k = 1, 2, 4, 8 runs on one manager, grouped (one step for all) and taking turns,
#      against k managers sharing the device (scripts/runs_bench.py)
#
# On a lent machine (docs/benchmarks.md, "On a lent GPU machine"): carry stripped
# release binaries (--bin), point the loader at the machine's PyTorch (LD_LIBRARY_PATH:
# its torch/lib and nvidia/cu13/lib), and run it with a time limit; it takes about seven
# minutes on an H100.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
device=cuda small= bin= python= tests=
while (( $# )); do
    case $1 in
        --device) device=$2; shift 2 ;;
        --small) small=1; shift ;;
        --bin) bin=$2; shift 2 ;;
        --python) python=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "gpu-check.sh: unknown argument $1 (see scripts/gpu-check.sh --help)" >&2; exit 2 ;;
    esac
done
case $device in cuda|cuda:*|cpu) ;; *) echo "gpu-check.sh: --device is cuda, cuda:N or cpu, not $device" >&2; exit 2 ;; esac
out=${OUT:-data/gpu-check}
mkdir -p "$out"
started=$(date +%s)
step() { echo "==> [$(( $(date +%s) - started )) s] $*" >&2; }

if [[ -z "$bin" ]]; then
    step "building shine-manager, shine-worker and replay_bench (release)"
    . scripts/env.sh
    cargo build --release -p shine-manager --bin shine-manager --example replay_bench >&2
    cargo build --release -p shine-worker >&2
    bin=${CARGO_TARGET_DIR:-target}/release
fi
replay_bench=$bin/replay_bench
[[ -x $replay_bench ]] || replay_bench=$bin/examples/replay_bench
for b in "$bin/shine-manager" "$bin/shine-worker" "$replay_bench"; do
    [[ -x $b ]] || { echo "gpu-check.sh: $b is missing (--bin DIR holds shine-manager, shine-worker and replay_bench)" >&2; exit 2; }
done
if [[ -z "$python" ]]; then
    if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi

if [[ -n "$small" ]]; then
    bench=(--capacity 20000 --update-sizes 1,100,1000 --adds 3000 --batches 32,128 --steps 20 --warmup 3 --repeats 2 --graph-batches 32,128 --group-runs 1,2)
    torch_args=(--capacity 20000 --steps 20 --warmup 3 --repeats 2)
    runs_args=(--k 1,2 --secs 1 --warmup-secs 0.5 --capacity 20000 --burn-in 500)
else
    bench=(--capacity 1000000 --update-sizes 1,10,100,1000,2000,10000 --adds 50000 --batches 16,32,64,128,256 --steps 500 --warmup 50 --repeats 5 --graph-batches 32,128 --group-runs 1,2,4,8)
    torch_args=(--capacity 1000000 --steps 500 --warmup 50 --repeats 5)
    runs_args=(--k 1,2,4,8 --secs 10 --warmup-secs 5 --capacity 1000000)
fi

step "1. the machine"
{
    # A copy of the tree that is not a git checkout (a lent machine's) names its commit
    # in a COMMIT file beside the scripts.
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || cat COMMIT 2>/dev/null || echo unknown)"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    nproc | sed 's/^/cores: /'
    if [[ $device == cuda* ]]; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory,clocks.sm,power.limit --format=csv
    fi
    lscpu | grep -E '^(Model name|CPU\(s\)|Flags)' | cut -c1-200
} | tee "$out/machine.txt" >&2

step "2. the device as shine-manager's code sees it"
# A one-step replay_bench (the manager's library): asking for CUDA where libtorch cannot
# see it fails here, saying so; on CUDA it also captures and checks a graph once.
if ! "$replay_bench" --device "$device" --threads 1 --capacity 2000 --update-sizes 1000 --adds 2000 --batches 32 --steps 1 --warmup 1 \
    --repeats 1 --graph-batches 32 >"$out/device.txt" 2>&1; then
    cat "$out/device.txt" >&2
    echo "gpu-check.sh: shine-manager's code cannot use device $device (above); for CUDA, LD_LIBRARY_PATH must hold the PyTorch's torch/lib and nvidia/cu13/lib" >&2
    exit 1
fi
head -n 1 "$out/device.txt" >&2

if [[ -n "$tests" && $device == cuda* ]]; then
    step "2b. the trainer's graph tests on the GPU"
    "$tests" --ignored graph_tests --test-threads 1 2>&1 | tee "$out/graph_tests.txt" >&2
fi

step "3. replay_bench --device $device ${bench[*]}"
"$replay_bench" --device "$device" --threads 1 "${bench[@]}" --graph-dot "$out/train-step-graph.dot" | tee "$out/replay_bench.txt" >&2

if [[ $device == cuda* ]]; then
    step "3b. the kernels of one graph replay (Nsight Compute, where ncu is installed)"
    if command -v ncu >/dev/null; then
        # Each kernel node of exactly one replay of the captured step (batch 32), timed on
        # its own: replay_bench turns the profiler on around that one replay alone
        # (--profile-one-replay), and ncu profiles nothing else (--profile-from-start off).
        if ncu --csv --graph-profiling node --profile-from-start off --metrics gpu__time_duration.sum \
            "$replay_bench" --device "$device" --threads 1 --capacity 20000 --update-sizes 1000 --adds 2000 --batches 32 --steps 2 --warmup 0 \
            --repeats 1 --graph-batches 32 --group-runs 1 --profile-one-replay >"$out/ncu.csv" 2>"$out/ncu.log"; then
            "$python" - "$out/ncu.csv" <<'PY' | tee "$out/ncu-kernels.txt" >&2
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')) if r.get("Metric Name") == "gpu__time_duration.sum"]
# The unit as ncu writes it (ns today; older versions spell it out): to microseconds.
to_us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
units = {r["Metric Unit"] for r in rows}
unknown = units - to_us.keys()
if unknown:
    sys.exit(f"ncu reports times in {unknown}, which this script does not know")
times = sorted(((float(r["Metric Value"].replace(",", "")) * to_us[r["Metric Unit"]], r["Kernel Name"]) for r in rows), reverse=True)
total = sum(t for t, _ in times)
print(f"{len(times)} kernels, {total:.2f} us in all (each timed alone, under ncu; units read: {', '.join(sorted(units))})")
print("| us | share | kernel |")
for us, name in times:
    print(f"| {us:.2f} | {us / total * 100:.1f} % | `{name[:120]}` |")
PY
        else
            echo "ncu failed (its log: $out/ncu.log): no kernel times" | tee "$out/ncu-kernels.txt" >&2
        fi
    else
        echo "ncu is not installed on this machine: no kernel times (the kernel list by name is in replay_bench's output)" | tee "$out/ncu-kernels.txt" >&2
    fi
fi

step "4. the same update in PyTorch"
torch_extra=()
[[ $device == cuda* ]] && torch_extra=(--compile)
"$python" scripts/torch_step_bench.py --device "$device" --batches 32,128 "${torch_args[@]}" "${torch_extra[@]}" | tee "$out/torch_step_bench.txt" >&2

step "5. k runs on one manager (grouped, in turns) against k managers"
if [[ $device == cuda* ]]; then
    cores=$(nproc)
    runs_pin=(--manager-core "0-$(( cores / 2 - 1 ))" --worker-core "$(( cores / 2 ))-$(( cores - 1 ))")
else
    runs_pin=()
fi
python3 scripts/runs_bench.py --device "$device" --bin "$bin" --dir "$out/runs-bench" "${runs_pin[@]}" "${runs_args[@]}" | tee "$out/runs_bench.txt" >&2

step "done: every log is under $out"
# The table: the rows the steps printed, gathered.
{
    echo "## gpu-check on $device ($(head -c 200 "$out/machine.txt" | sed -n 's/^commit: //p')), $(( $(date +%s) - started )) s"
    echo
    if [[ $device == cuda* ]]; then sed -n '2p' "$out/machine.txt"; echo; fi
    # replay_bench's tables, told apart by the heading above each.
    rows() { awk -v want="$1" '/^Adding one experience/{t="add"} /^Train step/{t="step"} /^k runs as one grouped step/{t="group"} /eager against one CUDA-graph replay/{t="graph"} /^Kernels of one captured/{t="kernels"} /^\| [0-9]/ && t==want' "$out/replay_bench.txt"; }
    echo "Adding one experience (us): | update size | device replay | in-RAM replay |"
    rows add
    echo
    echo "Train step (ms): | batch | device | in-RAM | speedup | device, prioritized | in-RAM, prioritized | prioritized adds | ops, uniform | ops, prioritized |"
    rows step
    if grep -q 'eager against one CUDA-graph replay' "$out/replay_bench.txt"; then
        echo
        echo "Eager against one CUDA-graph replay: | batch | eager (us) | graph (us) | graph steps/s | ops | kernels | kernels x floor (us) | graph / floor |"
        grep -E '^\(the launch floor' "$out/replay_bench.txt"
        rows graph
    fi
    echo
    echo "Grouped step (k runs as one): | k | in turn, eager (us / k steps) | grouped, eager (us) | grouped, graph (us) | run-steps / s, grouped | ops / grouped step | kernels / grouped step |"
    rows group
    grep -E '^Grouped step, k = ' "$out/replay_bench.txt" || true
    if grep -q '^Kernels of one captured' "$out/replay_bench.txt"; then
        echo
        grep -E '^Kernels of one captured' "$out/replay_bench.txt"
        echo "| count | kernel |"
        rows kernels
        echo
        echo "The kernels of one replay (ncu):"
        cat "$out/ncu-kernels.txt"
    fi
    echo
    echo "PyTorch, the same update:"
    grep -E '^\| [0-9]+ \| (eager|compiled)' "$out/torch_step_bench.txt"
    echo
    echo "Runs on one device:"
    grep -E '^ *[0-9]+ |^   k=' "$out/runs_bench.txt"
} | tee "$out/summary.md"
