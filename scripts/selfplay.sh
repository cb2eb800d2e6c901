#!/usr/bin/env bash
# Self-play on this machine: a Fox run and a Marth run, each the other's opponent, measured: the selfplay preset of Shine's experiment driver. Its options:
# scripts/selfplay.sh --help (or scripts/experiment.py selfplay --help).
exec python3 "$(dirname "${BASH_SOURCE[0]}")/experiment.py" selfplay "$@"
