#!/usr/bin/env bash
# Installs PyTorch 2.11.0 (the libtorch that tch 0.24 builds against) from the Python
# package index into the project's own virtual environment, and links it as ./.venv.
#
# Idempotent: when the environment is already complete it returns in well under a
# second. The environment lives outside the clone (default ~/.cache/shine/) so that
# fresh clones and CI runs on the same machine reuse it; override with SHINE_VENV.
set -euo pipefail

TORCH_VERSION=2.11.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${SHINE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shine/venv-torch-$TORCH_VERSION}
stamp="$venv/.shine-torch-$TORCH_VERSION"

if [[ ! -f "$stamp" ]]; then
    python=$(command -v python3 || true)
    if [[ -z "$python" ]]; then
        echo "error: python3 not found; install Python 3.9+ (Debian: apt-get install python3 python3-venv)" >&2
        exit 1
    fi
    echo "==> creating the virtual environment $venv (PyTorch $TORCH_VERSION, a few GiB, once)" >&2
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv" || {
        echo "error: could not create a virtual environment (Debian: apt-get install python3-venv)" >&2
        exit 1
    }
    "$venv/bin/pip" install --disable-pip-version-check --progress-bar off "torch==$TORCH_VERSION" >&2
    "$venv/bin/python" - <<PY
import torch, pathlib
assert torch.__version__.split('+')[0] == "$TORCH_VERSION", torch.__version__
assert (pathlib.Path(torch.__file__).parent / "lib" / "libtorch_cpu.so").exists()
PY
    touch "$stamp"
fi

# The CUDA headers PyTorch's CUDA wheels leave out, which PyTorch's own CUDA headers
# include: the C runtime's (crt/host_config.h, 134 kB) and CCCL's (nv/target, 3 MB).
# manager/build.rs compiles the CUDA-graph shim against them. Headers only, pinned to
# the CUDA 13.0 of the wheel's own nvidia-cuda-runtime.
CUDA_HEADERS=(nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85)
headers_stamp="$venv/.shine-cuda-headers-13.0"
if [[ ! -f "$headers_stamp" ]]; then
    echo "==> installing the CUDA headers PyTorch's wheel leaves out (${CUDA_HEADERS[*]})" >&2
    "$venv/bin/pip" install --disable-pip-version-check --progress-bar off --no-deps "${CUDA_HEADERS[@]}" >&2
    touch "$headers_stamp"
fi

# ./.venv is the project's view of its environment (ignored by git).
if [[ "$(readlink "$root/.venv" 2>/dev/null)" != "$venv" ]]; then
    rm -rf "$root/.venv"
    ln -s "$venv" "$root/.venv"
fi
echo "$venv"
