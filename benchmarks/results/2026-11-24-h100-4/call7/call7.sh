#!/usr/bin/env bash
# device call 7 of 2026-11-24 (fourth session): nightly-profile verification of glu_packed and
# add_mul_act's Triton kernel (the activations' reciprocal); then the activation kernels' backward
# grid with grad_bias (programs per SM; bias_gelu's tanh backward measured 3-5% slower than its
# baseline in calls 2 and 5).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TESTS=tests/test_kernels.py STEP_TIMEOUT=${VERIFY_S:-330} bash benchmarks/gpu_run.sh verify -k "glu_packed or (add_mul_act and triton)" > /dev/null
grep -E "PASSED|FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -40
STEP_TIMEOUT=${TUNE_S:-200} bash benchmarks/gpu_run.sh tune elementwise_backward > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
