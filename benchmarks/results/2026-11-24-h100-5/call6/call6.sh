#!/usr/bin/env bash
# device call 6: one-group row layouts as inner_rows 1 (a constant to Triton; no branch):
# (1) the whole kernel suite, the fault tests, the row-layout and CUDA-extension unit tests in the
# ci profile; (2) the row kernels' benchmark with the gate; (3) the activations' benchmark
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-220} \
  TESTS="tests/test_kernels.py tests/test_faults.py tests/unit/test_row_layout.py tests/unit/test_cuda_extension.py" \
  bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -12
VERIFY_BUDGET=5 BENCH_BUDGET=150 STEP_TIMEOUT=${BENCH_S:-190} bash benchmarks/gpu_run.sh bench rows softmax layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "regression|improvement|nightly rc" $OUT/log_bench_rows.txt | head -5
tar czf $OUT/rows.tgz -C $OUT rows && rm -r $OUT/rows
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=${BENCH_S:-150} bash benchmarks/gpu_run.sh bench acts bias_gelu add_mul_act glu > /dev/null
grep -E "regression|improvement|nightly rc" $OUT/log_bench_acts.txt | head -5
tar czf $OUT/acts.tgz -C $OUT acts && rm -r $OUT/acts
date -u
