#!/bin/sh
# Builds shine-worker (release, without libtorch) from the source tree this script sits
# in, and installs it as PREFIX/bin/shine-worker.
#
#   scripts/build-worker.sh PREFIX
#
# The worker image (configs/container/Containerfile.worker) runs exactly this, and so does the test
# that builds and starts a worker from a clean copy of the source
# (manager/tests/fleet.rs). Needs cargo (Rust 1.95 or newer) and a C compiler (ring);
# honours CARGO_TARGET_DIR. POSIX sh: the container runs it with dash.
set -eu

prefix=${1:?usage: build-worker.sh PREFIX (the binary goes to PREFIX/bin/shine-worker)}
# Relative paths are the caller's: make them absolute before changing directory.
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    case $CARGO_TARGET_DIR in /*) ;; *) CARGO_TARGET_DIR=$(pwd)/$CARGO_TARGET_DIR ;; esac
    export CARGO_TARGET_DIR
fi
cd "$(dirname "$0")/.."

# -p shine-worker alone: cargo unifies features across the packages of one build, and
# building the manager in the same run would turn on the agent's `torch` feature.
# --locked: exactly the dependency versions of Cargo.lock, as tested.
cargo build --release --locked -p shine-worker

target=${CARGO_TARGET_DIR:-target}
mkdir -p "$prefix/bin"
# Copy, then rename: a worker running from PREFIX never sees half a binary.
cp "$target/release/shine-worker" "$prefix/bin/.shine-worker.new"
chmod 0755 "$prefix/bin/.shine-worker.new"
mv -f "$prefix/bin/.shine-worker.new" "$prefix/bin/shine-worker"

# A worker VM or container gets this one binary: it must not need libtorch.
if ldd "$prefix/bin/shine-worker" | grep -i torch >&2; then
    echo "build-worker.sh: error: shine-worker links libtorch (above); it must not" >&2
    exit 1
fi
"$prefix/bin/shine-worker" --version
