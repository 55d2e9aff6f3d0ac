#!/usr/bin/env bash
# device call 2: (1) split_dot's unit tests (TF32 and bf16 pieces) on the GPU; (2) the fp32 DLRM
# forward with TF32 against bf16 pieces, timed and its error (probe_pieces.py); (3) ncu of the
# TF32 forward at 65536 x 26 x 64; (4) every forward-side fp32 dlrm_interaction property,
# nightly, 3 shards (column tiles past 4 now loop: call 1's shards timed out compiling).
C=benchmarks/results/2026-11-24-h100-6/call2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_split_dot.py 2>&1 | tail -5
timeout 120 python3 $C/probe_pieces.py $OUT/pieces.json 2>&1 | grep -v Warn
date -u
cat > /tmp/ncu_fwd.py <<'PY'
import torch, kernels.dlrm_interaction as d
x = torch.randn(65536, 64, device="cuda"); s = torch.randn(65536, 26, 64, device="cuda")
for _ in range(3): d._forward(x, s)
torch.cuda.synchronize()
PY
timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis \
  -k regex:_interaction_fwd -s 2 -c 1 python3 /tmp/ncu_fwd.py > $OUT/ncu_fwd32.txt 2>&1
grep -E "Duration|Throughput|Busy|Pipe|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Issue|Registers|Warp Cycles" $OUT/ncu_fwd32.txt | head -40
date -u
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=3 STEP_TIMEOUT=${SHARD_S:-170} bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert" $OUT/log_verify-shards.txt | head -40
date -u
