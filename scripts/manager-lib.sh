# Sourced (not run) by learn.sh, selfplay.sh and selfplay-league.sh: one shine-manager
# in the background with the workers a script starts beside it, all stopped together
# when the script ends, however it ends.
#
#   start_manager LOG COMMAND...   run COMMAND (a shine-manager) with its output in LOG,
#                                  set $manager, stop everything at exit, and wait up to
#                                  20 s for $url/healthz to answer
#   worker_pids+=($!)              after starting each worker
#   cleanup                        stop the workers (first, so that they flush their
#                                  uploads to a manager still listening), then the manager

worker_pids=()

start_manager() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 &
    manager=$!
    trap cleanup EXIT INT TERM
    for _ in $(seq 1 100); do
        python3 -c "import urllib.request; urllib.request.urlopen('$url/healthz', timeout=1)" 2>/dev/null && break
        sleep 0.2
    done
}

cleanup() {
    for w in "${worker_pids[@]}"; do kill -TERM "$w" 2>/dev/null; done
    for w in "${worker_pids[@]}"; do wait "$w" 2>/dev/null; done
    worker_pids=()
    kill -TERM "$manager" 2>/dev/null && wait "$manager" 2>/dev/null
    true
}
