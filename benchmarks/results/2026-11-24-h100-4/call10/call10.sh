#!/usr/bin/env bash
# device call 10 of 2026-11-24 (fourth session): the review's fixes (the backward's resident count
# per compiled variant, tiles_per_group not specialised, FORCED_LAUNCH checked, broadcast rows on
# the pointer kernel): the GPU unit tests; the backward and determinism properties of the kernels
# whose grouping changed (nightly profile); the whole kernel suite and the fault tests in the ci
# profile; the benchmark sweep of bias_gelu and add_mul_act against call 9's baselines.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/unit/test_linear_act_launch.py \
  tests/unit/test_term_hooks.py tests/unit/test_resident_programs.py tests/unit/test_gradient_terms.py > $OUT/log_unit.txt 2>&1
echo "unit tests rc=$?" >> $OUT/log_unit.txt; tail -3 $OUT/log_unit.txt
TESTS=tests/test_kernels.py STEP_TIMEOUT=${VERIFY_S:-150} bash benchmarks/gpu_run.sh verify -k "(bias_gelu or (add_mul_act and triton) or linear_act) and (backward or determinism)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -8
mv $OUT/log_verify.txt $OUT/log_verify_nightly.txt
PROFILE=ci STEP_TIMEOUT=${CI_S:-160} bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -12
VERIFY_BUDGET=5 BENCH_BUDGET=90 STEP_TIMEOUT=${BENCH_S:-120} bash benchmarks/gpu_run.sh bench ew2 bias_gelu add_mul_act > /dev/null
grep -E " triton |regression|improvement|nightly rc" $OUT/log_bench_ew2.txt | head -30
