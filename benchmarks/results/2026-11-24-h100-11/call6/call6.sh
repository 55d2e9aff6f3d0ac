#!/usr/bin/env bash
# Call 6: the final code. (1) the unit tests this session touched; (2) every kernel's tests and
# the fault tests, ci profile; (3) harness nightly's softmax benchmark (baselines).
C=benchmarks/results/2026-11-24-h100-11/call6
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_wide_math.py tests/unit/test_even_tiles.py \
  tests/unit/test_norm_stats.py tests/unit/test_tune_rows.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=300 bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=160 bash benchmarks/gpu_run.sh bench softmax softmax > /dev/null
grep -E "softmax .*(triton|compile) " $OUT/log_bench_softmax.txt | awk -F'│' '{print $3,$4,$5,$6,$7,$9,$11,$12}'
grep -E "regression|improvement|nightly rc" $OUT/log_bench_softmax.txt | cut -c1-140
date -u
