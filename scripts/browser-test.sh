#!/usr/bin/env bash
# End-to-end test of the dashboard in real headless Chromium: builds the binaries,
# starts a real shine-manager (temporary data dir, tiny burn-in so training and
# publishing start within seconds) with two runs, `default` and `fight`, and a real
# shine-worker for each, runs web/tests/dashboard.test.mjs (Playwright driving
# Debian's chromium), restarts the manager on the same data dir and address while the
# workers play on, runs the test's second part (`--after-restart`: the history from
# before the restart is still drawn, both workers are back), then stops them all.
#
#   scripts/browser-test.sh            debug binaries
#   SHINE_PROFILE=release scripts/browser-test.sh
#   SHINE_BIN=DIR scripts/browser-test.sh   binaries built already: DIR/shine-manager,
#                                      DIR/shine-worker, DIR/examples/play_check (no cargo run;
#                                      scripts/test.sh, whose other tests use them meanwhile)
#
# Installs what is missing: Debian's `chromium` package (scripts/setup-debian.sh;
# Playwright's own browser download is not used; CHROMIUM=PATH takes another build
# instead), Node.js and npm when there is no `node`/`npm` on PATH, and playwright-core
# from web/tests/package-lock.json (npm ci), which asks for Node.js 20 or newer.
# Screenshots and the downloaded models go to $SHINE_ARTIFACTS (default
# target/browser-artifacts); the manager's and workers' logs too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

art=${SHINE_ARTIFACTS:-$root/target/browser-artifacts}
rm -rf "$art"
mkdir -p "$art"

# Debian's chromium, unless CHROMIUM names another build (dashboard.test.mjs reads it).
pkgs=()
[ -n "${CHROMIUM:-}" ] || pkgs+=(chromium)
# Node.js and npm, unless some are on PATH already (from Debian or elsewhere, such as
# NodeSource's nodejs, which carries its own npm).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
[ ${#pkgs[@]} -eq 0 ] || scripts/setup-debian.sh "${pkgs[@]}"
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    # Debian 12's nodejs is 18; Debian 13's is 20. npm ci only warns about it.
    echo "browser-test.sh: warning: playwright-core (web/tests/package-lock.json) asks for Node.js 20 or newer;" \
        "this is $(node --version). If the test fails to start, install a newer Node.js (https://nodejs.org/)." >&2
fi
if [ ! -f web/tests/node_modules/playwright-core/package.json ]; then
    echo "==> npm ci (web/tests)" >&2
    (cd web/tests && npm ci --no-audit --no-fund)
fi

if [ -n "${SHINE_BIN:-}" ]; then
    # Absolute: the test itself runs in web/tests and starts the worker from there.
    bin=$(cd "$SHINE_BIN" 2>/dev/null && pwd) || { echo "browser-test.sh: SHINE_BIN=$SHINE_BIN is not a folder" >&2; exit 2; }
else
    . scripts/env.sh
    profile=${SHINE_PROFILE:-debug}
    flags=()
    [ "$profile" = release ] && flags=(--release)
    echo "==> building shine-manager, its play_check and shine-worker ($profile)" >&2
    # Two cargo runs, as in scripts/test.sh: the worker is built without libtorch.
    # play_check replays the match the test plays in the page (manager/examples/play_check.rs).
    cargo build "${flags[@]}" -p shine-manager --bin shine-manager --example play_check
    cargo build "${flags[@]}" -p shine-worker --bin shine-worker
    bin=$(cd "${CARGO_TARGET_DIR:-$root/target}/$profile" && pwd)
fi
for b in "$bin/shine-manager" "$bin/shine-worker" "$bin/examples/play_check"; do
    [ -x "$b" ] || { echo "browser-test.sh: $b is missing" >&2; exit 2; }
done

tmp=$(mktemp -d)
pids=()
# Forget a process that has been waited for, so that cleanup never signals its id.
forget() {
    local keep=() pid
    for pid in "${pids[@]}"; do [ "$pid" = "$1" ] || keep+=("$pid"); done
    pids=("${keep[@]}")
}
cleanup() {
    # Only the processes this script started, by their ids; SIGTERM lets each stop cleanly.
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    cp "$tmp"/*.log "$art"/ 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# The manager's config is a test config, testkit/configs/browser.toml (small and quick,
# two runs; the manager's config test parses it); the address, the data directory and
# the token are this script's flags.
config=testkit/configs/browser.toml
token=browser-test-token
# The limit of a wait for something that must happen (the manager listening, a process
# exiting): long enough that only a hang reaches it, on any machine (a loaded 2-core VM
# running debug builds). A wait ends on its event, so it costs nothing when all is well.
hang_secs=600

# Starts the manager with its log in $tmp/$1, listening on $2 (default 127.0.0.1:0), and waits
# until it listens (scripts/harness.py, within its HANG_SECS): sets manager (its pid) and url.
start_manager() {
    "$bin/shine-manager" --config "$config" --data-dir "$tmp/data" --token "$token" --listen "${2:-127.0.0.1:0}" >"$tmp/$1" 2>&1 &
    manager=$!
    pids+=("$manager")
    # (Port 0: the address is the one its log names.)
    url=$(python3 scripts/harness.py wait-manager --pid "$manager" --log "$tmp/$1") || exit 1
    echo "    $url" >&2
}

# One worker per run, each with its own spool dir and log (appended to across the
# restart): sets workers (their pids).
start_workers() {
    "$bin/shine-worker" run --manager "$url" --token "$token" --run default --envs 1 --seed 1 --spool-dir "$tmp/spool" >>"$tmp/worker.log" 2>&1 &
    workers=($!)
    "$bin/shine-worker" run --manager "$url" --token "$token" --run fight --envs 1 --seed 2 --spool-dir "$tmp/spool-fight" >>"$tmp/worker-fight.log" 2>&1 &
    workers+=($!)
    pids+=("${workers[@]}")
}

# SIGTERM to one of ours, and its exit status once it has stopped (within $hang_secs s).
stop() {
    kill "$1" 2>/dev/null || true
    local deadline=$((SECONDS + hang_secs))
    while [ "$SECONDS" -lt "$deadline" ]; do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$1" 2>/dev/null && { echo "process $1 did not stop within $hang_secs s of SIGTERM" >&2; exit 1; }
    local rc=0
    wait "$1" || rc=$?
    forget "$1"
    return "$rc"
}

echo "==> starting shine-manager" >&2
start_manager manager.log
echo "==> starting two shine-workers, one per run" >&2
start_workers

browser_test() {
    (cd web/tests && SHINE_URL="$url" SHINE_TOKEN="$token" SHINE_ARTIFACTS="$art" SHINE_WORKER_BIN="$bin/shine-worker" \
        SHINE_RESTART_AT="${restart_at:-}" SHINE_PLAY_CHECK="$bin/examples/play_check" node dashboard.test.mjs "$@") || status=$?
}

echo "==> browser test (headless chromium)" >&2
status=0
browser_test
if [ "$status" -eq 0 ]; then
    # The workers stay up, as on a real fleet: they spool while the manager is away,
    # then register again with the new one (on the same address) and deliver.
    echo "==> restarting shine-manager on the same data dir and address" >&2
    # SIGTERM: the manager writes its final checkpoints and history, then exits 0.
    stop "$manager" || { echo "shine-manager exited with status $? on SIGTERM" >&2; exit 1; }
    # Every sample before this time is the old process's, every one after the new one's.
    restart_at=$(date +%s.%N)
    start_manager manager-after-restart.log "${url#http://}"
    echo "==> browser test after the restart" >&2
    browser_test --after-restart
fi
if [ "$status" -ne 0 ]; then
    for log in manager.log manager-after-restart.log worker.log worker-fight.log; do
        [ -f "$tmp/$log" ] || continue
        echo "==> $log (tail)" >&2; tail -n 30 "$tmp/$log" >&2
    done
fi
echo "==> artifacts: $art" >&2
exit "$status"
