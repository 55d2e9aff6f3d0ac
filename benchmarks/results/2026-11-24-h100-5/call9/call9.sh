#!/usr/bin/env bash
# device call 9, the session's final code: (1) the whole kernel suite, the fault tests and the
# GPU-facing unit tests in the ci profile; (2) the norms' benchmark with the gate (the mean's
# refinement only from 2048 columns), baselines to record
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat benchmarks/results/2026-11-24-h100-5/call9/commit.txt)
nvidia-smi -L; date -u
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-220} \
  TESTS="tests/test_kernels.py tests/test_faults.py tests/unit/test_row_layout.py tests/unit/test_cuda_extension.py tests/unit/test_norm_stats.py tests/unit/test_norm_tiles.py" \
  bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=${BENCH_S:-150} bash benchmarks/gpu_run.sh bench norms layer_norm dropout_add_norm > /dev/null
grep -E "nightly rc" $OUT/log_bench_norms.txt
grep -E "regression \||improvement \|" $OUT/norms/summary.md | cut -d'|' -f2,4,5 | head -40
tar czf $OUT/norms.tgz -C $OUT norms && rm -r $OUT/norms
date -u
