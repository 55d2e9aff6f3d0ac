#!/usr/bin/env bash
# Call 10: probe_fp32_backward_tile.py (bias_gelu's fp32 backward, exact and tanh, on other tiles).
C=benchmarks/results/2026-11-24-h100-10/call10
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 300 python3 $C/probe_fp32_backward_tile.py $OUT/backward_tile.json 2>&1 | grep -v "Warn\|warn"
date -u
