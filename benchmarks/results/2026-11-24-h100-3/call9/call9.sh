#!/usr/bin/env bash
# device call 9 of 2026-11-24 (third session): 16-bit LayerNorm's split rows at 1 backward program
# per SM (call 8's sweep): layer_norm backward, determinism, unwritten in the nightly profile, 2
# seeded shards each; then the benchmark sweep of LayerNorm and RMSNorm (baselines).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T=tests/test_kernels.py::test_kernel
TESTS="$(for d in float16 bfloat16; do echo -n "$T[layer_norm-triton-$d-backward] $T[layer_norm-triton-$d-determinism] $T[layer_norm-triton-$d-unwritten] "; done)" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-200} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=10 BENCH_BUDGET=200 STEP_TIMEOUT=${BENCH_S:-260} bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm > /dev/null
grep -E "forward_backward .* triton |regression|improvement|nightly rc" $OUT/log_bench_norms.txt | head -30
