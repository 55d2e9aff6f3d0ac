#!/usr/bin/env bash
# device call 5 of 2026-11-24 (second session): the flash_attention and dlrm_interaction checks that
# ran on earlier code, on the final code, in seeded shards (three sets side by side, 20 processes)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T=tests/test_kernels.py::test_kernel
run_set() {  # NAME SHARDS TESTS...
  local name=$1 shards=$2
  shift 2
  TESTS="$*" SHARDS=$shards OUT=$OUT/$name STEP_TIMEOUT=${SHARD_S:-480} bash benchmarks/gpu_run.sh verify-shards > /dev/null
  for file in $OUT/$name/shards/*.txt; do  # a shard that did not pass: its report, in the output
    grep -q "1 passed" $file || { echo "== $file"; tail -n 40 $file; }
  done
  tar czf $OUT/$name/shards.tgz -C $OUT/$name shards && rm -r $OUT/$name/shards
}
run_set guards 4 $T[flash_attention-triton-float16-guards] $T[flash_attention-triton-bfloat16-guards] &
run_set flash 2 $T[flash_attention-triton-float16-determinism] $T[flash_attention-triton-bfloat16-determinism] \
  $T[flash_attention-triton-float16-unwritten] $T[flash_attention-triton-bfloat16-unwritten] &
run_set dlrm 1 $T[dlrm_interaction-triton-float16-unwritten] $T[dlrm_interaction-triton-bfloat16-unwritten] \
  $T[dlrm_interaction-triton-float16-determinism] $T[dlrm_interaction-triton-bfloat16-determinism] &
wait
grep -h -E "shards|passed|failed|error" $OUT/*/log_verify-shards.txt
