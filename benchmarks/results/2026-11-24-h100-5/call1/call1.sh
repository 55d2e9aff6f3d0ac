#!/usr/bin/env bash
# device call 1 of 2026-11-24 (fifth session): dlrm_interaction's fp32 partial sums (d985bad):
# (1) the fp32 forward's and backward's tile sweep; (2) every fp32 property in the nightly profile,
# 2 seeded shards each; (3) harness nightly's dlrm benchmark with the regression gate.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
for k in forward backward; do
  timeout ${TUNE_S:-125} python3 benchmarks/tune_dlrm.py $OUT/tune_${k}32.json float32 $k > $OUT/tune_${k}32.txt 2>&1
  echo "tune $k rc=$?"; grep -E "production|Error" $OUT/tune_${k}32.txt
done
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward backward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-150} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 30 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=5 BENCH_BUDGET=100 STEP_TIMEOUT=${BENCH_S:-130} bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "regression|improvement|drift|nightly rc|float32" $OUT/log_bench_dlrm.txt | head -30
date -u
