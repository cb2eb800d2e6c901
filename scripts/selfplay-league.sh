#!/usr/bin/env bash
# The league's table of a self-play run's bots and a Fox trained against the CPU: the league preset of Shine's experiment driver. Its options:
# scripts/selfplay-league.sh --help (or scripts/experiment.py league --help).
exec python3 "$(dirname "${BASH_SOURCE[0]}")/experiment.py" league "$@"
