#!/usr/bin/env bash
# device call 7 of 2026-11-24 (third session): the backward's measured prefetch rule (16-bit RMSNorm
# rows of 256-1024 at 4 warps from 512, 16-bit LayerNorm rows of 1024, fp32 dropout-add-norm rows of
# 1024 at one row and 4 warps): (1) the benchmark sweep of the norms and dropout-add-norm (baselines);
# (2) the backward properties it touches in the nightly profile, 2 seeded shards each.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
VERIFY_BUDGET=10 BENCH_BUDGET=280 STEP_TIMEOUT=${BENCH_S:-330} bash benchmarks/gpu_run.sh bench rows layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "forward_backward .* triton |regression|improvement|nightly rc" $OUT/log_bench_rows.txt | head -40
T=tests/test_kernels.py::test_kernel
TESTS="$(for k in layer_norm rms_norm; do for d in float16 bfloat16; do echo -n "$T[$k-triton-$d-backward] "; done; echo -n "$T[$k-triton-bfloat16-determinism] $T[$k-triton-float16-unwritten] "; done)
  $T[dropout_add_norm-triton-float32-backward] $T[dropout_add_norm-triton-float32-determinism] $T[dropout_add_norm-triton-float32-unwritten]" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-230} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
