#!/usr/bin/env bash
# Call 5: dlrm_interaction's fp32 forward with 16-, 32- and 64-column heads, at 1 and 2 warps
# (probe_fwd32_tiles.py: package copies side by side, times and worst errors).
C=benchmarks/results/2026-11-24-h100-9/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 300 python3 $C/probe_fwd32_tiles.py $OUT/fwd32_tiles.json 2>&1 | grep -v "Warn\|warn"
date -u
