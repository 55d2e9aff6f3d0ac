#!/usr/bin/env bash
# device call 5 of 2026-11-24 (fourth session): the code as it stands (linear_act's persistent TMA
# forward, exact gelu's halved erfc): (1) the launch tests on the GPU (linear_act's every path, the
# norms' tiles, attention's strides); (2) the benchmark sweep of linear_act and the activation
# kernels beside eager and torch.compile (baselines).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/unit/test_linear_act_launch.py \
  tests/unit/test_norm_tiles.py tests/unit/test_launch_strides.py > $OUT/log_launch.txt 2>&1
echo "launch tests rc=$?" >> $OUT/log_launch.txt; tail -6 $OUT/log_launch.txt
VERIFY_BUDGET=10 BENCH_BUDGET=330 STEP_TIMEOUT=${BENCH_S:-380} bash benchmarks/gpu_run.sh bench ew linear_act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E " triton |regression|improvement|nightly rc|not run" $OUT/log_bench_ew.txt | head -60
