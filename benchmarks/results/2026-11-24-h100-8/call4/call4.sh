#!/usr/bin/env bash
# Call 4: the activation kernels' benchmark sweep with their programs in column-block order (the
# gate against the baselines of 2026-11-24-h100-4, call 9), then nightly-profile verification of
# glu_packed and add_mul_act's Triton kernel.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
VERIFY_BUDGET=10 BENCH_BUDGET=230 STEP_TIMEOUT=270 bash benchmarks/gpu_run.sh bench act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E "regression|improvement|nightly rc|not run" $OUT/log_bench_act.txt | head -40
TESTS=tests/test_kernels.py STEP_TIMEOUT=250 bash benchmarks/gpu_run.sh verify -k "glu_packed or (add_mul_act and triton)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -12
