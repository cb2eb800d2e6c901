#!/usr/bin/env python3
"""What the scripts share to run Shine's processes: the release build, a manager started
and waited for until it answers, workers beside it, and everything stopped in order
(the workers first, so that they hand their last uploads to a manager still listening,
then the manager, which writes its checkpoint) however the script ends; a script killed
outright takes them with it (each gets SIGTERM from the kernel).

Imported by experiment.py, soak.py and runs_bench.py. The shell scripts (demo.sh,
browser-test.sh) call its one command-line use:

    python3 scripts/harness.py wait-manager --pid PID --log LOG [--url URL]

waits until the manager with that process id answers GET URL/healthz (without --url:
until its log names the address it listens on) and prints the URL; exits 1, with the
log's last lines, if the manager exits first or does not answer within HANG_SECS.
"""
import argparse
import ctypes
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The limit of a wait for something that must happen (a manager answering, a process
# stopping): long enough that only a hang reaches it on any machine (a loaded 2-core VM
# running debug builds). A wait ends on its event, so it costs nothing when all is well.
HANG_SECS = 600

# The line a manager logs once it listens (shine-manager's main.rs).
LISTENING = re.compile(r"^shine-manager listening on (http://\S+)$", re.M)


def build():
    """Release builds of shine-manager and shine-worker (two cargo runs: the worker on
    its own, without libtorch), progress on stderr; the folder they are in."""
    print("==> building shine-manager and shine-worker (release)", file=sys.stderr, flush=True)
    out = subprocess.run(
        ["bash", "-c", ". scripts/env.sh && cargo build --release -p shine-manager >&2 && "
         "cargo build --release -p shine-worker >&2 && echo \"${CARGO_TARGET_DIR:-target}/release\""],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    return os.path.join(ROOT, out.stdout.strip().splitlines()[-1])


def token():
    return secrets.token_hex(16)


def get_json(url, timeout=20):
    return json.load(urllib.request.urlopen(url, timeout=timeout))


def post_json(url, token, timeout=20):
    """POST url with the bearer token and no body (the manager's pause and resume); its
    JSON answer."""
    request = urllib.request.Request(url, method="POST", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(request, timeout=timeout))


def download(url, path, timeout=60):
    """The body of GET url into the file path."""
    body = urllib.request.urlopen(url, timeout=timeout).read()
    with open(path, "wb") as f:
        f.write(body)


def rss_mb(pid):
    """Resident memory of a process in MB (VmRSS), None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kib = int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))
        return kib / 1024
    except (OSError, AttributeError):
        return None


def alive(pid):
    """Whether process pid runs (an exited child not yet reaped does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child that has exited but not been reaped is a zombie: gone for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tail(log, lines=20):
    try:
        with open(log, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return f"(no log at {log})\n"


def _stop_with_parent():
    """In a child, before it runs its program: SIGTERM to it when the script that started
    it dies, however it dies (kill -9 too), so that no manager or worker outlives its
    script holding the port and the data folder (Linux's PR_SET_PDEATHSIG; elsewhere
    nothing changes)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ManagerDown(Exception):
    """The manager exited or did not answer: the message names its log and ends with
    its last lines."""


def wait_manager(pid, log, url=None, hang=HANG_SECS):
    """Waits until the manager process pid answers GET url/healthz with "ok" (url None:
    until its log names the address it listens on, for a manager on port 0); returns
    the URL. Raises ManagerDown if it exits first or hangs past `hang` seconds."""
    deadline = time.monotonic() + hang
    while time.monotonic() < deadline:
        if url is None:
            try:
                with open(log, errors="replace") as f:
                    found = LISTENING.search(f.read())
                if found:
                    return found.group(1)
            except OSError:
                pass
        else:
            try:
                if urllib.request.urlopen(url + "/healthz", timeout=2).read() == b"ok":
                    return url
            except OSError:
                pass
        if not alive(pid):
            raise ManagerDown(f"shine-manager exited; the end of {log}:\n{_tail(log)}")
        time.sleep(0.1)
    raise ManagerDown(f"shine-manager did not answer within {hang} s; the end of {log}:\n{_tail(log)}")


class Fleet:
    """One manager and the workers beside it, stopped together: on stop(), at the end of
    a `with` block, or on SIGINT/SIGTERM (then the script exits 130/143); and should the
    script be killed, each gets SIGTERM from the kernel (_stop_with_parent)."""

    def __init__(self):
        self.manager = None
        self.workers = []
        self.url = None
        signal.signal(signal.SIGINT, lambda *_: (self.stop(), sys.exit(130)))
        signal.signal(signal.SIGTERM, lambda *_: (self.stop(), sys.exit(143)))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.stop()

    def start_manager(self, command, log, url):
        """Runs command (a shine-manager) with its output in the file log and waits until
        url answers; exits the script with the log's end if it does not."""
        self.manager = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=_stop_with_parent)
        try:
            self.url = wait_manager(self.manager.pid, log, url)
        except ManagerDown as e:
            self.stop()
            sys.exit(f"error: {e}")
        return self.url

    def start_worker(self, command, log):
        """Runs command (a shine-worker) with its output in the file log."""
        worker = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=_stop_with_parent)
        self.workers.append(worker)
        return worker

    def stop_worker(self, worker):
        """SIGTERM to one worker, not waited for: it hands over what its run still takes
        and exits on its own while the others run on; stop() reaps it with them (and a
        second SIGTERM there makes one still waiting quit at once)."""
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)

    def stop(self):
        """SIGTERM to the workers, each waited for, then to the manager (which writes its
        checkpoint); a process that outlives HANG_SECS is killed."""
        for group in (self.workers, [self.manager] if self.manager else []):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    p.wait(timeout=HANG_SECS)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.workers, self.manager = [], None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    wait = sub.add_parser("wait-manager", help="wait until a started manager answers; print its URL")
    wait.add_argument("--pid", type=int, required=True, help="the manager's process id")
    wait.add_argument("--log", required=True, help="the file its output goes to")
    wait.add_argument("--url", help="its address (default: the one its log names)")
    args = ap.parse_args()
    try:
        print(wait_manager(args.pid, args.log, args.url))
    except ManagerDown as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
