#!/usr/bin/env bash
# device call 8 of 2026-11-24 (third session): (1) the backward's programs per SM for rows wider
# than one block (LayerNorm, RMSNorm, dropout-add-LN); (2) 16-bit RMSNorm's split rows at 1 program
# per SM (the exception measured in calls 2 and 3), verified: rms_norm backward, determinism,
# unwritten in the nightly profile, 2 seeded shards each; (3) RMSNorm's benchmark sweep.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-120} bash benchmarks/gpu_run.sh tune norm_backward_split > /dev/null
grep -E "best|rc=|programs_per_sm" $OUT/log_tune.txt
T=tests/test_kernels.py::test_kernel
TESTS="$(for d in float16 bfloat16; do echo -n "$T[rms_norm-triton-$d-backward] $T[rms_norm-triton-$d-determinism] $T[rms_norm-triton-$d-unwritten] "; done)" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-200} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=10 BENCH_BUDGET=150 STEP_TIMEOUT=${BENCH_S:-200} bash benchmarks/gpu_run.sh bench rms rms_norm > /dev/null
grep -E "forward_backward .* triton |regression|improvement|nightly rc" $OUT/log_bench_rms.txt | head -30
