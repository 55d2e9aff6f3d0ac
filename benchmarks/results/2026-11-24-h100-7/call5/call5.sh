#!/usr/bin/env bash
# device call 5: why call 4 timed LayerNorm's column-block backward 28% slower than call 2:
# probe_columns.py times call 2's kernels against this commit's in one run.
C=benchmarks/results/2026-11-24-h100-7/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 200 python3 $C/probe_columns.py $OUT/probe_columns.json 2>&1 | grep -v Warn
date -u
