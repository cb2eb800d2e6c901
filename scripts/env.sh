# Source this file (". scripts/env.sh") to build Shine by hand: it makes sure the
# PyTorch environment exists and exports what tch's build script needs.
#   LIBTORCH_USE_PYTORCH=1  take libtorch from the installed Python package
#   VIRTUAL_ENV / PATH      so that build script runs the environment's `python`
# Binaries carry an rpath to that libtorch, so running them needs none of this.
_shine_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_shine_venv=$("$_shine_root/scripts/setup-torch.sh") || return 1
export VIRTUAL_ENV="$_shine_venv"
case ":$PATH:" in *":$_shine_venv/bin:"*) ;; *) export PATH="$_shine_venv/bin:$PATH" ;; esac
export LIBTORCH_USE_PYTORCH=1
unset _shine_root _shine_venv
