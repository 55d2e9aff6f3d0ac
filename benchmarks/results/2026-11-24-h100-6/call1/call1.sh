#!/usr/bin/env bash
# device call 1: (1) split_dot's unit tests on the GPU; (2) tune_dlrm.py float32 forward (the
# split-TF32 forward, 16 tilings at 65536 x 26 x {64, 16}); (3) every forward-side fp32
# dlrm_interaction property, nightly, 3 shards; (4) bench of the norms (forwards skip the stats).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat benchmarks/results/2026-11-24-h100-6/call1/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_split_dot.py 2>&1 | tail -5
timeout 150 python3 benchmarks/tune_dlrm.py $OUT/tune_fwd32.json float32 forward 2>&1 | grep -v "^   " ; grep -A18 "forward 65536x26x64" $OUT/log_tune.txt 2>/dev/null
date -u
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=3 STEP_TIMEOUT=${SHARD_S:-160} bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert" $OUT/log_verify-shards.txt | head -40
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=100 STEP_TIMEOUT=${BENCH_S:-130} bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm > /dev/null
grep -E "regression|improvement|drift|nightly rc| forward .*(triton|compile) " $OUT/log_bench_norms.txt | head -40
tar czf $OUT/norms.tgz -C $OUT norms && rm -r $OUT/norms
date -u
