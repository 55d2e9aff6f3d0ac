#!/usr/bin/env bash
# device call 5: (1) the whole kernel suite, the fault tests and the GPU-facing unit tests, ci
# profile, on the final code; (2) harness nightly's dlrm benchmark with the regression gate (the
# baselines to record).
C=benchmarks/results/2026-11-24-h100-6/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-300} \
  TESTS="tests/test_kernels.py tests/test_faults.py tests/unit/test_row_layout.py tests/unit/test_cuda_extension.py tests/unit/test_split_dot.py tests/unit/test_norm_stats.py" \
  bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -20
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=${BENCH_S:-110} bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "float32 .*(triton|compile) " $OUT/log_bench_dlrm.txt | head -12
grep -E "regression|improvement" $OUT/dlrm/summary.md | head -20
tar czf $OUT/dlrm.tgz -C $OUT dlrm && rm -r $OUT/dlrm
date -u
