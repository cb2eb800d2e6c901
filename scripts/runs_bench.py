#!/usr/bin/env python3
"""Several runs on one manager against as many separate managers, given the same
compute: the benchmark of docs/benchmarks.md ("Several runs on one device").

    python3 scripts/runs_bench.py                      (k = 1, 2, 4; 60 s each)
    python3 scripts/runs_bench.py --k 4 --secs 120 --capacity 100000
    python3 scripts/runs_bench.py --device cuda --bin DIR   (on a GPU: one card shared, prebuilt binaries)

For each k: (a) one manager with k runs (`[[runs]]` r1..rk) trained as one grouped step
(`[trainer] grouped = true`), (b) the same manager with the runs taking turns
(`grouped = false`), and (c) k managers with one run each. (With k = 1 there is no group:
only (b) and (c).) Every manager is pinned to the same single core (`taskset -c
--manager-core`, standing in for one shared device), every worker to the other
(`--worker-core`), one worker per run with one environment. The rate limiter is off
(`samples_per_insert = 0`): once a run's burn-in is in, it trains as fast as it is
given the device. After every run has trained for --warmup-secs, the train steps of
each run are read, again --secs later; the resident memory (VmRSS) of the manager
processes is summed at the end, with the GPU memory they hold (nvidia-smi) on a GPU and,
beside it, what PyTorch's caching allocator says of it (each manager's /metrics:
`shine_device_allocated_bytes`, `shine_device_reserved_bytes`), and the CUDA graphs
captured (`shine_graph_captures_total`: one per group for its life). Prints one row per
(k, mode): aggregate steps/s, each run's steps/s, the smallest run's share of its fair
share, and the memory; then for each k the grouped manager against the separate
managers, and against one run alone.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request

import harness
from harness import ROOT, get_json, rss_mb

TRAINER = """
[trainer]
device = "{device}"
burn_in = {burn_in}
samples_per_insert = 0.0
checkpoint_every = 0
checkpoint_every_secs = 0.0
grouped = {grouped}
"""

# The modes of a trial: one manager grouped, one manager in turns, k managers.
MODES = ["grouped", "turns", "separate"]


def manager_config(port, data, token, capacity, runs, device="cpu", burn_in=2000, grouped=False):
    text = f"""
[server]
listen = "127.0.0.1:{port}"
data_dir = "{data}"
token = "{token}"
[workers]
upload_every_secs = 1.0
[replay]
capacity = {capacity}
update_size = 1000
{TRAINER.format(device=device, burn_in=burn_in, grouped=str(grouped).lower())}
"""
    for r in runs:
        text += f'\n[[runs]]\nname = "{r}"\n'
    return text


def gpu_mb(pids):
    """GPU memory the managers hold, as nvidia-smi reports it (None without a GPU)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = {int(p): float(m) for p, m in (line.split(",") for line in out.splitlines() if line.strip())}
    return sum(used.get(pid, 0.0) for pid in pids)


def from_metrics(urls):
    """Summed over the managers: the device's allocated and reserved MB (None on the
    CPU, where they are not exported) and the graphs captured."""
    alloc = reserved = captures = 0.0
    seen = False
    for u in urls:
        with urllib.request.urlopen(u + "/metrics", timeout=30) as r:
            text = r.read().decode()
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name.startswith("shine_device_allocated_bytes{"):
                alloc, seen = alloc + float(value) / 2**20, True
            elif name.startswith("shine_device_reserved_bytes{"):
                reserved += float(value) / 2**20
            elif name.startswith("shine_graph_captures_total{"):
                captures += float(value)
    return (alloc, reserved) if seen else None, int(captures)


def steps(urls):
    """Train steps by run, over every manager."""
    out = {}
    for u in urls:
        for r in get_json(u + "/api/v1/runs")["runs"]:
            out[(u, r["name"])] = r["train_steps"]
    return out


def trial(bindir, k, mode, args, base_port, workdir):
    token = harness.token()
    names = [f"r{i + 1}" for i in range(k)]
    managers = [(base_port, names)] if mode != "separate" else [(base_port + i, [n]) for i, n in enumerate(names)]
    procs, urls, mpids = [], [], []
    try:
        for j, (port, runs) in enumerate(managers):
            d = os.path.join(workdir, f"{mode}-k{k}-m{j}")
            subprocess.run(["rm", "-rf", d], check=True)
            os.makedirs(d)
            cfg = os.path.join(d, "manager.toml")
            with open(cfg, "w") as f:
                f.write(manager_config(port, os.path.join(d, "data"), token, args.capacity, runs, args.device, args.burn_in, mode == "grouped"))
            log = os.path.join(d, "manager.log")
            p = subprocess.Popen(["taskset", "-c", str(args.manager_core), os.path.join(bindir, "shine-manager"), "--config", cfg],
                                 stdout=open(log, "w"), stderr=subprocess.STDOUT)
            procs.append(p)
            mpids.append(p.pid)
            url = f"http://127.0.0.1:{port}"
            try:
                harness.wait_manager(p.pid, log, url)
            except harness.ManagerDown as e:
                sys.exit(f"k={k} {mode}: {e}")
            urls.append(url)
            for r in runs:
                wlog = os.path.join(d, f"worker-{r}.log")
                cmd = ["taskset", "-c", str(args.worker_core), os.path.join(bindir, "shine-worker"), "run", "--manager", url,
                       "--token", token, "--envs", "1", "--spool-dir", os.path.join(d, f"spool-{r}")]
                if mode != "separate":
                    cmd += ["--run", r]
                procs.append(subprocess.Popen(cmd, stdout=open(wlog, "w"), stderr=subprocess.STDOUT))
        # Every run past burn-in, then the warm-up.
        deadline = time.time() + 600
        while min(steps(urls).values()) == 0:
            if time.time() > deadline:
                sys.exit(f"k={k} {mode}: a run did not start training within 10 minutes (logs under {workdir})")
            time.sleep(0.2)
        time.sleep(args.warmup_secs)
        s0, t0 = steps(urls), time.time()
        time.sleep(args.secs)
        s1, t1 = steps(urls), time.time()
        rss = sum(rss_mb(pid) or 0.0 for pid in mpids)
        per_run = sorted((s1[key] - s0[key]) / (t1 - t0) for key in s1)
        torch_mem, captures = from_metrics(urls)
        return per_run, rss, gpu_mb(mpids), torch_mem, captures
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", default="1,2,4", help="run counts, comma-separated (1,2,4)")
    ap.add_argument("--secs", type=float, default=60, help="seconds measured per trial (60)")
    ap.add_argument("--warmup-secs", type=float, default=15, help="seconds of training before measuring (15)")
    ap.add_argument("--capacity", type=int, default=1_000_000, help="[replay] capacity of every run (1,000,000)")
    ap.add_argument("--manager-core", default="0", help="the cores every manager is pinned to, as taskset -c takes them (0)")
    ap.add_argument("--worker-core", default="1", help="the cores every worker is pinned to (1)")
    ap.add_argument("--device", default="cpu", help="[trainer] device of every manager: cpu (default), cuda, cuda:N")
    ap.add_argument("--burn-in", type=int, default=2000, help="[trainer] burn_in of every run (2000)")
    ap.add_argument("--bin", help="a folder with shine-manager and shine-worker already built (default: build release here)")
    ap.add_argument("--port", type=int, default=8300, help="first port (8300)")
    ap.add_argument("--dir", default="data/runs-bench", help="data and logs (data/runs-bench)")
    args = ap.parse_args()

    bindir = args.bin or harness.build()
    workdir = os.path.join(ROOT, args.dir)
    print(f"device {args.device}; {args.secs:g} s measured after {args.warmup_secs:g} s of training; capacity {args.capacity:,}", flush=True)
    print(f"{'k':>2} {'mode':<19} {'steps/s total':>13} {'per run (min..max)':>20} {'spread':>7} {'min/fair':>8} {'RSS MB':>7} {'GPU MB':>7} "
          f"{'alloc MB':>8} {'rsrvd MB':>8} {'captures':>8}", flush=True)
    results = {}
    for k in [int(x) for x in args.k.split(",")]:
        for mode in MODES if k > 1 else MODES[1:]:
            per_run, rss, gpu, torch_mem, captures = trial(bindir, k, mode, args, args.port, workdir)
            total = sum(per_run)
            fair = total / k
            spread = (max(per_run) - min(per_run)) / statistics.mean(per_run) if k > 1 else 0.0
            results[(k, mode)] = (total, rss, gpu)
            label = {"grouped": "1 manager, grouped", "turns": "1 manager, turns", "separate": f"{k} managers"}[mode]
            alloc, reserved = ("-", "-") if torch_mem is None else (f"{torch_mem[0]:.0f}", f"{torch_mem[1]:.0f}")
            print(f"{k:>2} {label:<19} {total:>13.0f} {min(per_run):>9.0f}..{max(per_run):<9.0f} {spread * 100:>6.1f}% "
                  f"{min(per_run) / fair * 100:>7.1f}% {rss:>7.0f} {'-' if gpu is None else f'{gpu:.0f}':>7} {alloc:>8} {reserved:>8} {captures:>8}", flush=True)
        best = "grouped" if k > 1 else "turns"
        (one, one_rss, one_gpu), (sep, sep_rss, _) = results[(k, best)], results[(k, "separate")]
        line = f"   k={k}: one manager ({best}) {one / sep * 100:.1f} % of the separate managers' steps/s, {one_rss / sep_rss * 100:.1f} % of their memory"
        alone = results.get((1, "turns"))
        if alone and k > 1:
            line += f"; {one / alone[0]:.2f} times one run's steps/s"
            if one_gpu is not None and alone[2]:
                line += f", {one_gpu / alone[2]:.2f} times its GPU memory"
        print(line, flush=True)


if __name__ == "__main__":
    main()
