#!/usr/bin/env bash
# Call 9: probe_softmax_short.py (softmax's short-row tilings against torch.compile).
C=benchmarks/results/2026-11-24-h100-10/call9
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 300 python3 $C/probe_softmax_short.py $OUT/short.json 2>&1 | grep -v "Warn\|warn"
date -u
