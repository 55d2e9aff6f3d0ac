#!/usr/bin/env bash
# Call 7: the norms' unmasked forward for rows of up to 1024 columns only (call 6: wider even rows
# got slower). (1) harness nightly's norm benchmark with the gate (the baselines to record);
# (2) the norm unit tests on the GPU; (3) every kernel's tests and the fault tests, ci profile, on
# the session's final kernels.
C=benchmarks/results/2026-11-24-h100-9/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=140 bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "(layer_norm|rms_norm) .* forward .*(triton|compile) " $OUT/log_bench_norms.txt | cut -c1-150
grep -E "regression|improvement|nightly rc|not run" $OUT/log_bench_norms.txt | cut -c1-160 | head -30
date -u
timeout 100 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_norm_even_tiles.py tests/unit/test_norm_forward_only.py \
  tests/unit/test_norm_tiles.py tests/unit/test_norm_stats.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
PROFILE=ci JOBS=16 STEP_TIMEOUT=260 bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
