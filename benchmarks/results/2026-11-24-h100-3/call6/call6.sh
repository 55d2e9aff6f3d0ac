#!/usr/bin/env bash
# device call 6 of 2026-11-24 (third session): the norms' backward with its next row tile loaded
# ahead (BWD_PREFETCH): (1) on and off at the production tiles, 2 and 4 programs per SM;
# (2) on, over smaller tiles (it holds two tiles' inputs in registers).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-220} bash benchmarks/gpu_run.sh tune norm_backward_groups norm_backward_prefetch > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
grep -E "programs_per_sm2_prefetch" $OUT/log_tune.txt
