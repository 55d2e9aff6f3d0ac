#!/usr/bin/env bash
# device call 6 of 2026-11-24 (fourth session): nightly-profile verification of the kernels this
# session changed: linear_act (TMA forward), bias_gelu and glu (the activations' reciprocal, exact
# gelu's halved erfc).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TESTS=tests/test_kernels.py STEP_TIMEOUT=${VERIFY_S:-540} bash benchmarks/gpu_run.sh verify -k "linear_act or bias_gelu or (glu and not glu_packed)" > /dev/null
grep -E "PASSED|FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -60
