#!/bin/sh
# Builds shine-worker (release, without libtorch) from the source tree this script sits
# in, and installs it as PREFIX/bin/shine-worker, with its debug info beside it.
#
#   scripts/build-worker.sh PREFIX
#
#   PREFIX/bin/shine-worker        what a VM or image runs: the debug sections stripped
#                                  (the symbol table kept, so a backtrace names functions)
#   PREFIX/bin/shine-worker.debug  the debug info (line tables, zlib-compressed), which
#                                  the binary names in its .gnu_debuglink: next to it,
#                                  a panic's backtrace (RUST_BACKTRACE=1), gdb and
#                                  addr2line show files and lines. Keep it for crash
#                                  reports; a worker does not need it.
#
# The worker image (configs/container/Containerfile.worker) runs exactly this, and so does the test
# that builds and starts a worker from a clean copy of the source
# (manager/tests/fleet.rs). Needs cargo (Rust 1.95 or newer), a C compiler (ring) and
# binutils' objcopy; honours CARGO_TARGET_DIR. POSIX sh: the container runs it with dash.
# docs/fleet.md has the sizes.
set -eu

prefix=${1:?usage: build-worker.sh PREFIX (the binary goes to PREFIX/bin/shine-worker)}
# Relative paths are the caller's: make them absolute before changing directory.
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    case $CARGO_TARGET_DIR in /*) ;; *) CARGO_TARGET_DIR=$(pwd)/$CARGO_TARGET_DIR ;; esac
    export CARGO_TARGET_DIR
fi
cd "$(dirname "$0")/.."
command -v objcopy >/dev/null 2>&1 || {
    echo "build-worker.sh: error: objcopy not found (it splits off the debug info): install binutils" >&2
    exit 1
}

# -p shine-worker alone: cargo unifies features across the packages of one build, and
# building the manager in the same run would turn on the agent's `torch` feature.
# --locked: exactly the dependency versions of Cargo.lock, as tested.
cargo build --release --locked -p shine-worker

target=${CARGO_TARGET_DIR:-target}
bin=$prefix/bin
mkdir -p "$bin"
# Split in a folder of our own beside the result, then rename: a worker running from
# PREFIX never sees half a binary. The debug file gets its final name here, because
# --add-gnu-debuglink records the name (and a CRC) of the file it is given.
tmp=$(mktemp -d "$bin/.shine-worker.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$target/release/shine-worker" "$tmp/shine-worker"
objcopy --only-keep-debug --compress-debug-sections=zlib "$tmp/shine-worker" "$tmp/shine-worker.debug"
objcopy --strip-debug --add-gnu-debuglink="$tmp/shine-worker.debug" "$tmp/shine-worker"
chmod 0644 "$tmp/shine-worker.debug"
chmod 0755 "$tmp/shine-worker"
mv -f "$tmp/shine-worker.debug" "$bin/shine-worker.debug"
mv -f "$tmp/shine-worker" "$bin/shine-worker"

# A worker VM or container gets this one binary: it must not need libtorch.
if ldd "$bin/shine-worker" | grep -i torch >&2; then
    echo "build-worker.sh: error: shine-worker links libtorch (above); it must not" >&2
    exit 1
fi
"$bin/shine-worker" --version
