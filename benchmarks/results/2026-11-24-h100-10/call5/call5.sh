#!/usr/bin/env bash
# Call 5: probe_softmax_prefetch.py (softmax's one-block forward with prefetch.global.L2 of the
# row tile AHEAD programs later, AHEAD in none, 66, 132, 264, 528).
C=benchmarks/results/2026-11-24-h100-10/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 400 python3 $C/probe_softmax_prefetch.py $OUT/prefetch.json 2>&1 | grep -v "Warn\|warn"
date -u
