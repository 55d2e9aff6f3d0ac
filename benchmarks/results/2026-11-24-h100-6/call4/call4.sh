#!/usr/bin/env bash
# device call 4: (1) tune_dlrm.py float32 backward (the backward's products split into bf16
# pieces too; 16 tilings at 65536 x 26 x {64, 16}); (2) every fp32 dlrm_interaction property,
# nightly, 3 shards; (3) harness nightly's dlrm benchmark with the regression gate.
C=benchmarks/results/2026-11-24-h100-6/call4
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 170 python3 benchmarks/tune_dlrm.py $OUT/tune_bwd32.json float32 backward 2>&1 | grep -v "Warn\|warn"
date -u
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward backward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=3 STEP_TIMEOUT=${SHARD_S:-170} bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert" $OUT/log_verify-shards.txt | head -40
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=${BENCH_S:-110} bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "triton|compile" $OUT/log_bench_dlrm.txt | grep "│" | head -30
grep -E "regression|improvement" $OUT/dlrm/summary.md | head -20
tar czf $OUT/dlrm.tgz -C $OUT dlrm && rm -r $OUT/dlrm
date -u
