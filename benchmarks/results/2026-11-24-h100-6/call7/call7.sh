#!/usr/bin/env bash
# device call 7: back to the head/tail split_dot (call 6: one chain a tile cost the dim-64 forward
# 22%), with the review's tests: (1) split_dot's and the fp32 forward paths' unit tests on the
# GPU; (2) the forward's error against eager's (call6/probe_error.py); (3) every forward-side fp32 dlrm_interaction property,
# nightly, 3 shards; (4) harness nightly's dlrm benchmark with the regression gate.
C=benchmarks/results/2026-11-24-h100-6/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_split_dot.py tests/unit/test_dlrm_paths.py 2>&1 | tail -3
timeout 120 python3 benchmarks/results/2026-11-24-h100-6/call6/probe_error.py $OUT/error.json 2>&1 | grep -v Warn
date -u
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=3 STEP_TIMEOUT=${SHARD_S:-170} bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert" $OUT/log_verify-shards.txt | head -40
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=${BENCH_S:-110} bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "float32 .*(triton|compile) " $OUT/log_bench_dlrm.txt | head -12
grep -E "regression|improvement" $OUT/dlrm/summary.md | head -20
tar czf $OUT/dlrm.tgz -C $OUT dlrm && rm -r $OUT/dlrm
date -u
