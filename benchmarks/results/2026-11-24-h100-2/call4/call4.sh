#!/usr/bin/env bash
# device call 4 of 2026-11-24 (second session): the faulting nightly case under memcheck (raw, fixed),
# dlrm 16-bit forward and flash forward in shards, then the dlrm and flash benchmarks
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
here=benchmarks/results/2026-11-24-h100-2
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
mkdir -p $OUT/san
for mode in raw fixed; do
  timeout 100 $san --tool memcheck --print-limit 5 python3 $here/call4/probe_flash_repro.py $mode \
    $here/call2/flash_attention-triton-backward-bfloat16-a4e7faf1fe.py > $OUT/san/$mode.txt 2>&1
  echo "$mode rc=$? $(grep -m1 -E 'Invalid' $OUT/san/$mode.txt) $(grep -m1 -E 'ERROR SUMMARY' $OUT/san/$mode.txt)"
done
T=tests/test_kernels.py::test_kernel
TESTS="$T[dlrm_interaction-triton-float16-forward] $T[dlrm_interaction-triton-bfloat16-forward] $T[flash_attention-triton-float16-forward] $T[flash_attention-triton-bfloat16-forward]" \
  SHARDS=4 STEP_TIMEOUT=${SHARD_S:-200} bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|backward|forward" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=15 BENCH_BUDGET=150 STEP_TIMEOUT=200 bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction | grep -E "forward .*65536x26x128|forward .*65536x26x64 .*float16|regress|improv|rc="
VERIFY_BUDGET=10 BENCH_BUDGET=80 STEP_TIMEOUT=120 bash benchmarks/gpu_run.sh bench flash flash_attention --quick | grep -E "triton|sdpa|regress|improv|rc="
