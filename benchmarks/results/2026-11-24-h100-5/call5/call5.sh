#!/usr/bin/env bash
# device call 5: (1) the CUDA extension's unit tests on the kernels' device (0a-fixed glue tests);
# (2) harness nightly's benchmark of the row kernels (softmax, layer_norm, rms_norm,
# dropout_add_norm) with the regression gate, after one-group row layouts stopped dividing
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
date -u
PROFILE=ci JOBS=4 STEP_TIMEOUT=${CI_S:-150} TESTS="tests/unit/test_cuda_extension.py tests/unit/test_row_layout.py" \
  bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
VERIFY_BUDGET=10 BENCH_BUDGET=330 STEP_TIMEOUT=${BENCH_S:-380} bash benchmarks/gpu_run.sh bench rows softmax layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "forward(_backward)? .* (triton|compile) |regression|improvement|drift|nightly rc" $OUT/log_bench_rows.txt | head -120
tar czf $OUT/rows.tgz -C $OUT rows && rm -r $OUT/rows
date -u
