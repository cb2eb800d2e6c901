#!/usr/bin/env bash
# Shine's test command (the README's): sets up what is missing, then runs every test.
#
# Two cargo runs on purpose: cargo unifies features across the packages of one run, and
# the manager turns on the agent's `torch` feature. Testing the worker in a run of its
# own builds it exactly as users get it, without libtorch (worker/tests/linkage.rs
# checks that with ldd).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/env.sh

echo "==> tests: bridge, agent (with tch), manager" >&2
cargo test --workspace --exclude shine-worker "$@"
# The worker's end-to-end tests start the real manager binary (worker/tests/e2e.rs).
cargo build -p shine-manager
echo "==> tests: worker (built without libtorch)" >&2
cargo test -p shine-worker "$@"
echo "==> tests: the dashboard in headless Chromium" >&2
scripts/browser-test.sh
