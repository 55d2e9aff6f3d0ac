#!/usr/bin/env bash
# Call 1: dlrm_interaction's 16-bit forward, persistent and prefetching variants against production,
# a same-size copy and torch.compile (probe_dlrm_fwd.py's docstring says why).
C=benchmarks/results/2026-11-25-h100-13/call1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 500 python3 $C/probe_dlrm_fwd.py $OUT/probe_dlrm_fwd.json 2>&1 | grep -v Warning | tee $OUT/log_probe.txt | cut -c1-220
date -u
