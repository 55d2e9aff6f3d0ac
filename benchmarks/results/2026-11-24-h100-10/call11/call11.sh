#!/usr/bin/env bash
# Call 11: the re-read's refactor (reciprocal_seed shared by the kernels and the seed's test):
# the fp64 helpers' unit tests, and the activation kernels' tests in every dtype, ci profile.
C=benchmarks/results/2026-11-24-h100-10/call11
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_wide_math.py tests/unit/test_tune_rows.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -3 $OUT/log_unit.txt
PROFILE=ci STEP_TIMEOUT=150 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "bias_gelu or glu or add_mul_act or linear_act" > /dev/null
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify.txt | tail -4
date -u
