#!/usr/bin/env bash
# Call 15: nightly-profile verification of dlrm_interaction's fp32 backward on its new warps.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TESTS=tests/test_kernels.py STEP_TIMEOUT=200 bash benchmarks/gpu_run.sh verify -k "dlrm_interaction and float32 and (backward or gradcheck or determinism)" > /dev/null
grep -E "FAILED|ERROR|PASSED|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -12
