#!/usr/bin/env bash
# Call 6: probe_softmax_aa.py (production's softmax forward against plain copies of the package).
C=benchmarks/results/2026-11-24-h100-10/call6
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 300 python3 $C/probe_softmax_aa.py $OUT/aa.json 2>&1 | grep -v "Warn\|warn"
date -u
