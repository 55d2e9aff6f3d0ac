#!/usr/bin/env bash
# device call 1 of 2026-11-24 (third session): (1) sweep dropout-add-LayerNorm's forward tiling;
# (2) verify the split dropout scale (ff5b055, fp32/fp64 arithmetic) on the GPU: every
# dropout_add_norm fp32 property (gradcheck is fp64) in the nightly profile, 2 seeded shards each;
# (3) the fault tests and dropout_add_norm fp32 in the ci profile (the call-11 failures).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
STEP_TIMEOUT=${TUNE_S:-200} bash benchmarks/gpu_run.sh tune dropout_norm_forward > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward backward unwritten guards determinism dropout gradcheck contract; do echo -n "$T[dropout_add_norm-triton-float32-$c] "; done)" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-270} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
PROFILE=ci JOBS=8 STEP_TIMEOUT=${CI_S:-80} TESTS="tests/test_faults.py tests/test_kernels.py" bash benchmarks/gpu_run.sh verify -k "test_planted or test_a_ or (dropout_add_norm and float32)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -20
