#!/usr/bin/env bash
# Call 3: (1) probe_bias_gelu_widen.py (the exact fp32 forward's conversions: an fp64 bias, or
# conversion from the bits); (2) every unit test on the GPU; (3) the activation kernels' tests in
# every dtype, ci profile, on the final tiles (the compute-bound tile for bias_gelu's exact fp32
# forward alone).
C=benchmarks/results/2026-11-24-h100-10/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 150 python3 $C/probe_bias_gelu_widen.py $OUT/widen.json 2>&1 | grep -v "Warn\|warn"
date -u
timeout 240 python3 -m pytest -q -n 16 -p no:cacheprovider tests/unit > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -4 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=150 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "bias_gelu or glu or add_mul_act or linear_act" > /dev/null
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify.txt | tail -12
date -u
