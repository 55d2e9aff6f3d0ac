#!/usr/bin/env bash
# device call 2 of 2026-11-24 (third session): (1) sweep the norms' backward grid size (programs
# per SM); (2) verify dropout-add-norm's forward at its new tiling (1024 elements a program) in the
# nightly profile, 2 seeded shards each: forward, dropout, unwritten in three dtypes, determinism fp32.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-150} bash benchmarks/gpu_run.sh tune norm_backward_groups > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward dropout unwritten; do for d in float32 float16 bfloat16; do echo -n "$T[dropout_add_norm-triton-$d-$c] "; done; done) $T[dropout_add_norm-triton-float32-determinism]" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-330} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
