#!/usr/bin/env bash
# Installs what the Slippi adapter (python/shine_bot) needs, libmelee (`melee` 0.47.6,
# the version its tests were written against) and numpy, into the project's virtual
# environment (the one scripts/setup-torch.sh makes), and prints that environment's
# python. Idempotent: once installed it returns in well under a second.
#
# The tests use it: the adapter's own (python -m unittest) and agent/tests/slippi_replay.rs,
# which compares the adapter's states with Shine's own on a real replay.
set -euo pipefail

MELEE_VERSION=0.47.6
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$("$root/scripts/setup-torch.sh")
stamp="$venv/.shine-melee-$MELEE_VERSION"
if [[ ! -f "$stamp" ]]; then
    echo "==> installing melee $MELEE_VERSION and numpy into $venv (python/shine_bot's dependencies)" >&2
    "$venv/bin/pip" install --disable-pip-version-check --progress-bar off "melee==$MELEE_VERSION" numpy >&2
    "$venv/bin/python" -c 'import melee, numpy' >&2
    touch "$stamp"
fi
echo "$venv/bin/python"
