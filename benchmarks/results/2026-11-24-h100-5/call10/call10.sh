#!/usr/bin/env bash
# device call 10: after the review's fixes (278e7b3): dlrm_interaction (its backward's new
# static_assert under Triton 3.6) and the layer_norm kernel tests in the ci profile, with the
# row-layout and norm-statistics unit tests
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-200} \
  TESTS="tests/test_kernels.py tests/unit/test_row_layout.py tests/unit/test_norm_stats.py" \
  bash benchmarks/gpu_run.sh verify -k "dlrm_interaction or layer_norm or row_layout or mean" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
