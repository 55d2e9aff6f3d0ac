#!/usr/bin/env bash
# device call 9 of 2026-11-24 (fourth session): nightly-profile verification of glu_packed and
# add_mul_act's Triton kernel on the final code, then the benchmark sweep of linear_act and the
# activation kernels (baselines).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TESTS=tests/test_kernels.py STEP_TIMEOUT=${VERIFY_S:-240} bash benchmarks/gpu_run.sh verify -k "glu_packed or (add_mul_act and triton)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -20
VERIFY_BUDGET=10 BENCH_BUDGET=250 STEP_TIMEOUT=${BENCH_S:-290} bash benchmarks/gpu_run.sh bench final linear_act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E " triton |regression|improvement|nightly rc|not run" $OUT/log_bench_final.txt | head -60
