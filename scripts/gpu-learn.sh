#!/usr/bin/env bash
# The learning run with a GPU learner and a fleet on one machine: the gpu-learn preset of Shine's experiment driver. Its options:
# scripts/gpu-learn.sh --help (or scripts/experiment.py gpu-learn --help).
exec python3 "$(dirname "${BASH_SOURCE[0]}")/experiment.py" gpu-learn "$@"
