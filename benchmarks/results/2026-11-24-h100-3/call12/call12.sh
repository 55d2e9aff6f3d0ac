#!/usr/bin/env bash
# device call 12 of 2026-11-24 (third session): LayerNorm's forward on rows of 16384 (0.81x compile
# in one block in registers): against the two-pass streamed form at blocks of 2048-8192.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-150} bash benchmarks/gpu_run.sh tune layer_norm_wide > /dev/null
grep -E "best|rc=|fwd_|compile|copy" $OUT/log_tune.txt
