#!/usr/bin/env bash
# device call 7: the kernels that address rows through kernels._rows.row_offset, in the nightly
# profile after one-group layouts became inner_rows 1 (79b72ed): forward and backward of each,
# one dtype each, 2 seeded shards of 75 examples
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat benchmarks/results/2026-11-24-h100-5/call7/commit.txt)
nvidia-smi -L; date -u
T=tests/test_kernels.py::test_kernel
TESTS="$(for kd in layer_norm:bfloat16 rms_norm:float16 softmax:float32 bias_gelu:bfloat16 add_mul_act:float32 glu:bfloat16 dropout_add_norm:bfloat16; do
  for c in forward backward; do echo -n "$T[${kd%%:*}-triton-${kd##*:}-$c] "; done; done) $T[linear_act-triton-bfloat16-forward]" \
  SHARDS=2 STEP_TIMEOUT=${SHARD_S:-300} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 30 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
date -u
