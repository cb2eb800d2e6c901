#!/usr/bin/env bash
# Several seeds of the learning run, back to back, and one table: the seeds preset of Shine's experiment driver. Its options:
# scripts/learn-seeds.sh --help (or scripts/experiment.py seeds --help).
exec python3 "$(dirname "${BASH_SOURCE[0]}")/experiment.py" seeds "$@"
