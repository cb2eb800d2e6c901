#!/usr/bin/env python3
"""Memory soak: a manager and workers on the simulator, publishing models fast, with a
browser-like client watching a worker's live match; prints each process's resident
memory over time, then at the start, after warm-up and at the end.

    python3 scripts/soak.py --minutes 30            (2 workers, a model every 25 steps)

The workers swap models every few seconds and the manager publishes one every
--publish-every train steps, so leaks in the publish path, the registry, the live
fan-out, the stats history or the workers' model swaps show up as growth between the
warm-up sample and the end. docs/benchmarks.md ("Memory soak") has the figures.
"""
import argparse
import base64
import os
import re
import shutil
import socket
import sys
import threading
import time

import harness
from harness import ROOT, get_json, rss_mb


def watch_live(host, port, worker_id, stop, frames):
    """A minimal WebSocket client on GET /api/v1/live/{worker}: it reads (and drops)
    every frame the manager fans out, like a browser on the live view, reconnecting if
    the connection ends. `frames[0]` counts the messages."""
    while not stop.is_set():
        try:
            s = socket.create_connection((host, port), timeout=10)
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall((f"GET /api/v1/live/{worker_id} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                       f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    raise OSError("closed during the handshake")
                head += chunk
            if b" 101 " not in head.split(b"\r\n", 1)[0]:
                raise OSError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
            buf = head.split(b"\r\n\r\n", 1)[1]
            s.settimeout(30)
            while not stop.is_set():
                while len(buf) < 2:
                    buf += s.recv(65536) or b""
                    if len(buf) < 2:
                        raise OSError("closed")
                n, off = buf[1] & 0x7F, 2
                if n == 126:
                    n, off = int.from_bytes(buf[2:4], "big"), 4
                elif n == 127:
                    n, off = int.from_bytes(buf[2:10], "big"), 10
                while len(buf) < off + n:
                    more = s.recv(65536)
                    if not more:
                        raise OSError("closed")
                    buf += more
                if buf[0] & 0x0F == 0x8:
                    raise OSError("closed by the manager")
                frames[0] += 1
                buf = buf[off + n:]
        except OSError:
            time.sleep(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30, help="how long to run (30)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    ap.add_argument("--publish-every", type=int, default=25, help="train steps between published models (25)")
    ap.add_argument("--sample-secs", type=float, default=30, help="seconds between memory samples (30)")
    ap.add_argument("--warmup-minutes", type=float, default=5, help="the sample taken as 'after warm-up' (5)")
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--dir", default="data/soak", help="data and logs (data/soak, emptied first)")
    ap.add_argument("--bin", help="a folder with shine-manager and shine-worker already built (default: build release here)")
    args = ap.parse_args()

    bindir = args.bin or harness.build()
    data = os.path.join(ROOT, args.dir)
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(os.path.join(data, "logs"))
    with open(os.path.join(ROOT, "configs/demo.toml")) as f:
        config = re.sub(r"^publish_every = \d+", f"publish_every = {args.publish_every}", f.read(), flags=re.M)
    cfg_path = os.path.join(data, "soak.toml")
    with open(cfg_path, "w") as f:
        f.write(config)
    token = harness.token()
    url = f"http://127.0.0.1:{args.port}"
    stop = threading.Event()
    fleet = harness.Fleet()
    log = lambda n: os.path.join(data, "logs", n + ".log")
    fleet.start_manager([os.path.join(bindir, "shine-manager"), "--config", cfg_path, "--listen", f"127.0.0.1:{args.port}",
                         "--data-dir", data, "--token", token], log("manager"), url)
    for i in range(1, args.workers + 1):
        fleet.start_worker([os.path.join(bindir, "shine-worker"), "run", "--manager", url, "--token", token, "--envs", "1",
                            "--seed", str(i), "--spool-dir", os.path.join(data, f"spool-{i}")], log(f"worker-{i}"))
    procs = [("manager", fleet.manager)] + [(f"worker-{i}", w) for i, w in enumerate(fleet.workers, 1)]
    # Watch the first worker's live match, as a browser would, for the whole soak.
    live_frames = [0]
    for _ in range(100):
        workers = get_json(url + "/api/v1/workers")["workers"]
        if workers:
            break
        time.sleep(0.2)
    threading.Thread(target=watch_live, args=("127.0.0.1", args.port, workers[0]["worker_id"], stop, live_frames), daemon=True).start()

    names = [n for n, _ in procs]
    print(f"soak: {args.minutes:g} min, {args.workers} workers, a model every {args.publish_every} train steps; "
          f"a live client watches worker {workers[0]['worker_id']}; logs in {args.dir}/logs", flush=True)
    print("    min  " + "".join(f"{n + ' MB':>14}" for n in names) + "   models  live frames", flush=True)
    samples = []  # (minutes, [rss per process], model version)
    started = time.monotonic()
    try:
        while True:
            t = (time.monotonic() - started) / 60
            rss = [rss_mb(p.pid) for _, p in procs]
            if any(r is None for r in rss):
                dead = [n for n, r in zip(names, rss) if r is None]
                sys.exit(f"error: {', '.join(dead)} exited; see {args.dir}/logs")
            try:
                version = get_json(url + "/api/v1/stats?since=9e99")["current"]["model_version"]
            except OSError:
                version = samples[-1][2] if samples else 0
            samples.append((t, rss, version))
            print(f"{t:7.1f}  " + "".join(f"{r:14.1f}" for r in rss) + f"  {version:7d}  {live_frames[0]:11d}", flush=True)
            if t >= args.minutes:
                break
            time.sleep(args.sample_secs - (time.monotonic() - started) % args.sample_secs)
    finally:
        stop.set()
        fleet.stop()
    first = samples[0]
    warm = next((s for s in samples if s[0] >= args.warmup_minutes), samples[-1])
    last = samples[-1]
    print(f"\nresident memory (MB): start ({first[0]:.1f} min), after warm-up ({warm[0]:.1f} min), end ({last[0]:.1f} min), "
          f"growth from warm-up to end; models published: {last[2]}; live frames received: {live_frames[0]}")
    for i, n in enumerate(names):
        growth = 100 * (last[1][i] - warm[1][i]) / warm[1][i]
        print(f"  {n:<10} {first[1][i]:8.1f} {warm[1][i]:8.1f} {last[1][i]:8.1f}   {growth:+.1f} %")


if __name__ == "__main__":
    main()
