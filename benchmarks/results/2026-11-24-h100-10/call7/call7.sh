#!/usr/bin/env bash
# Call 7: the reviewed code. (1) the fp64 helpers' unit tests (the hardware reciprocal seed's test
# runs only here) and the tuning targets'; (2) every fp32 property of the activation kernels,
# nightly; (3) the whole kernel suite and the fault tests, ci profile.
C=benchmarks/results/2026-11-24-h100-10/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_wide_math.py tests/unit/test_tune_rows.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -3 $OUT/log_unit.txt; date -u
STEP_TIMEOUT=150 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "float32 and (bias_gelu or glu or add_mul_act or linear_act)" > /dev/null
mv $OUT/log_verify.txt $OUT/log_verify_fp32_nightly.txt
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify_fp32_nightly.txt | tail -6
date -u
PROFILE=ci STEP_TIMEOUT=280 bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify.txt | tail -12
date -u
