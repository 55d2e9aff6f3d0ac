#!/usr/bin/env bash
# Call 8: the final elementwise tiling (16-bit forwards 2048 elements a program, fp32 forwards
# their own 1024): the kernel tests of the three ops (ci profile) and the tune_rows unit tests,
# the activation kernels' benchmark (baselines), and softmax's benchmark beside it.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
HARNESS_PROFILE=ci timeout -s INT 100 python3 -m pytest -n 16 -q -p no:cacheprovider -p no:benchmark tests/test_kernels.py \
  tests/unit/test_tune_rows.py -k "bias_gelu or glu or add_mul_act or tune" > $OUT/log_tests.txt 2>&1; echo "rc=$?" >> $OUT/log_tests.txt
tail -2 $OUT/log_tests.txt
VERIFY_BUDGET=10 BENCH_BUDGET=230 STEP_TIMEOUT=270 bash benchmarks/gpu_run.sh bench act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E "regression|improvement|nightly rc|not run" $OUT/log_bench_act.txt | cut -c1-220 | head -40
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=110 bash benchmarks/gpu_run.sh bench softmax softmax > /dev/null
grep -E "regression|improvement|nightly rc|not run" $OUT/log_bench_softmax.txt | cut -c1-220 | head -20
