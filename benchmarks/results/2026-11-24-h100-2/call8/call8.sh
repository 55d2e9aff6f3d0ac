#!/usr/bin/env bash
# device call 8 of 2026-11-24 (second session): the norms' backward with the swept overrides, verified in
# seeded shards, then the LayerNorm and RMSNorm benchmark sweep (the regression gate against the baseline)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T=tests/test_kernels.py::test_kernel
TESTS="$(for k in layer_norm rms_norm; do for d in float32 float16 bfloat16; do echo -n "$T[$k-triton-$d-backward] "; done; done)" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-240} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=10 BENCH_BUDGET=220 STEP_TIMEOUT=${BENCH_S:-290} bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm > /dev/null
grep -E "forward_backward .* triton |regression|improvement|nightly rc" $OUT/log_bench_norms.txt | head -60
