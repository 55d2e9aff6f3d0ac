#!/usr/bin/env bash
# Install the project and its dependencies into the active Python environment.
#
# On a machine without an NVIDIA GPU, torch's CPU build and triton 3.8 are installed first
# (triton >= 3.8 runs loops with runtime bounds in the interpreter under numpy >= 2.4; 3.6 does not),
# so that no install step can pull a multi-GB CUDA build of torch. On a GPU machine the torch and
# triton already installed are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "install: NVIDIA GPU found; keeping the installed torch/triton"
else
    echo "install: no GPU; installing torch's CPU build and triton 3.8 for the interpreter"
    "$PY" -m pip install --quiet "torch==2.13.0" "triton==3.8.0"
fi
# setuptools in the environment: the outside-package check (and any offline editable install)
# builds without build isolation
"$PY" -m pip install --quiet "setuptools>=69"
"$PY" -m pip install --quiet -e ".[report]"
"$PY" -c "import torch, triton; print(f'install: torch {torch.__version__}, triton {triton.__version__}')"
