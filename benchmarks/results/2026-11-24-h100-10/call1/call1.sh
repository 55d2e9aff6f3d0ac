#!/usr/bin/env bash
# Call 1: the fp32 activations' cheaper fp64 arithmetic (exp_wide, the refined reciprocal seed).
# (1) the helpers' unit tests on the GPU (the rcp.approx.f64 path runs only here); (2) every fp32
# property of bias_gelu, glu, glu_packed, add_mul_act and linear_act, nightly; (3) the fp32
# elementwise forward tiling swept again (the old one was chosen for twice the fp64 work).
C=benchmarks/results/2026-11-24-h100-10/call1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_wide_math.py tests/unit/test_references.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -4 $OUT/log_unit.txt; date -u
STEP_TIMEOUT=240 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "float32 and (bias_gelu or glu or add_mul_act or linear_act)" > /dev/null
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify.txt | tail -12
date -u
STEP_TIMEOUT=230 bash benchmarks/gpu_run.sh tune elementwise_fp32 > /dev/null
tail -30 $OUT/log_tune.txt
date -u
