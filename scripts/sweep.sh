#!/usr/bin/env bash
# A grid of settings and seeds as the runs of one manager, trained together, and one table: the sweep preset of Shine's
# experiment driver. Its options: scripts/sweep.sh --help (or scripts/experiment.py sweep --help).
exec python3 "$(dirname "${BASH_SOURCE[0]}")/experiment.py" sweep "$@"
