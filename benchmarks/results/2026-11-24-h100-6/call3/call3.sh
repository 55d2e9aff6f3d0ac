#!/usr/bin/env bash
# device call 3: (1) the fp32 DLRM forward over piece types, tiles and register caps
# (probe_fp32_tiles.py); (2) every forward-side fp32 dlrm_interaction property, nightly, 3 shards,
# on bf16 pieces (now production: call 2 timed them 22-28% faster than TF32, at lower error).
C=benchmarks/results/2026-11-24-h100-6/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 200 python3 $C/probe_fp32_tiles.py $OUT/fp32_tiles.json 2>&1 | grep -v Warn
date -u
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=3 STEP_TIMEOUT=${SHARD_S:-170} bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert" $OUT/log_verify-shards.txt | head -40
date -u
