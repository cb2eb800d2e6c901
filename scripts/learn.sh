#!/usr/bin/env bash
# One learning run on this machine, evaluated and tabulated: the learn preset of Shine's experiment driver. Its options:
# scripts/learn.sh --help (or scripts/experiment.py learn --help).
exec python3 "$(dirname "${BASH_SOURCE[0]}")/experiment.py" learn "$@"
