#!/usr/bin/env bash
# device call 4 of 2026-11-24 (third session): (1) sweep the norms' backward pipelining (num_stages
# 1-5 at 2 and 4 programs per SM); (2) the whole kernel suite and the fault tests in the ci profile,
# 16 workers, on this session's code.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-160} bash benchmarks/gpu_run.sh tune norm_backward_groups > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-400} bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -20
