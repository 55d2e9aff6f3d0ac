#!/usr/bin/env bash
# device call 8: LayerNorm's refined mean (the call-7 nightly failure): (1) the stats unit test and
# the norm unit tests on the GPU; (2) the failing property (layer_norm bf16 forward) and the other
# forward properties of the LayerNorm statistics in the nightly profile, 2 shards; (3) the norms'
# benchmark with the gate: what the refinement costs
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat benchmarks/results/2026-11-24-h100-5/call8/commit.txt)
nvidia-smi -L; date -u
PROFILE=ci JOBS=4 STEP_TIMEOUT=${CI_S:-120} TESTS="tests/unit/test_norm_stats.py tests/unit/test_norm_tiles.py" \
  bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -6
T=tests/test_kernels.py::test_kernel
TESTS="$T[layer_norm-triton-bfloat16-forward] $T[layer_norm-triton-float16-forward] $T[layer_norm-triton-bfloat16-backward] $T[dropout_add_norm-triton-bfloat16-forward] $T[dropout_add_norm-triton-float16-forward]" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-200} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 30 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=${BENCH_S:-150} bash benchmarks/gpu_run.sh bench norms layer_norm dropout_add_norm > /dev/null
grep -E "nightly rc" $OUT/log_bench_norms.txt
grep -E "regression \||improvement \|" $OUT/norms/summary.md | cut -d'|' -f2,4,5 | head -40
tar czf $OUT/norms.tgz -C $OUT norms && rm -r $OUT/norms
date -u
