#!/usr/bin/env bash
# Installs whichever of the named Debian packages are missing.
#
#   scripts/setup-debian.sh PKG...
#
# A machine that has them all pays one dpkg-query per package and nothing else; only
# when one is missing does it run `apt-get update` (once) and `apt-get install`, as root
# or through sudo. Without root and without sudo it prints the packages and the command
# to run, and exits 1. On a system without dpkg (not Debian or Ubuntu) it cannot check:
# it says so, names the packages, and exits 0, leaving the tests that need them to say
# what they miss. scripts/test.sh and scripts/browser-test.sh call it.
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: setup-debian.sh PKG..." >&2; exit 2; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-debian.sh: not a Debian system (no dpkg-query/apt-get): cannot check for $*;" \
        "install their equivalents yourself if the tests that need them fail" >&2
    exit 0
fi

missing=()
for p in "$@"; do
    # db:Status-Status is "installed" only for a fully installed package (not one that
    # was removed with its config files left, or half configured).
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get update && apt-get install -y ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "setup-debian.sh: error: these Debian packages are missing: ${missing[*]}" >&2
        echo "  and installing them needs root (there is no sudo). As root, run:" >&2
        echo "    $cmd" >&2
        exit 1
    fi
    sudo=(sudo)
fi

echo "==> installing Debian packages: ${missing[*]} (${sudo[*]:+sudo }apt-get)" >&2
# `env` so the variable survives sudo, which resets the environment.
if ! { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "setup-debian.sh: error: could not install ${missing[*]} (above). Run, as root:" >&2
    echo "    $cmd" >&2
    exit 1
fi
