#!/usr/bin/env bash
# device call 5 of 2026-11-24 (third session): dropout-add-LayerNorm's forward sweep again, with
# the fp32-arithmetic diagnostic at the production tile (in call 1 it ran at whichever candidate
# the call before it had set).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-200} bash benchmarks/gpu_run.sh tune dropout_norm_forward > /dev/null
grep -E "best|diag|fwd_target_elems1024_thread_bytes64|rc=" $OUT/log_tune.txt
