#!/usr/bin/env bash
# device call 10 of 2026-11-24 (second session): dropout-add-norm's backward with the swept tiling,
# verified in seeded shards (backward, unwritten in three dtypes, gradcheck), then its benchmark sweep
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in backward unwritten; do for d in float32 float16 bfloat16; do echo -n "$T[dropout_add_norm-triton-$d-$c] "; done; done) $T[dropout_add_norm-triton-float32-gradcheck]" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-240} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=10 BENCH_BUDGET=200 STEP_TIMEOUT=${BENCH_S:-260} bash benchmarks/gpu_run.sh bench dropout dropout_add_norm > /dev/null
grep -E "forward_backward .* triton |regression|improvement|nightly rc" $OUT/log_bench_dropout.txt | head -40
