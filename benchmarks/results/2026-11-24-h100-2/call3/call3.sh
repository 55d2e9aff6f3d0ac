#!/usr/bin/env bash
# device call 3 of 2026-11-24 (second session): the inner-stride probe, the dlrm tiling sweep, flash backward in shards
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 150 python3 benchmarks/results/2026-11-24-h100-2/call3/probe_flash_inner_stride.py $OUT/probe_inner_stride.json > $OUT/probe_inner_stride.txt 2>&1
echo "probe rc=$?"; grep -c "ok rel" $OUT/probe_inner_stride.txt; grep -v "ok rel" $OUT/probe_inner_stride.txt | head -40
timeout 130 python3 benchmarks/tune_dlrm.py $OUT/tune_dlrm.json > $OUT/tune_dlrm.txt 2>&1; echo "tune rc=$?"; grep -E "^[0-9]" $OUT/tune_dlrm.txt
TESTS="tests/test_kernels.py::test_kernel[flash_attention-triton-float16-backward] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-backward]" \
  SHARDS=7 STEP_TIMEOUT=${SHARD_S:-270} bash benchmarks/gpu_run.sh verify-shards
