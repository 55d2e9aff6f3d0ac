#!/usr/bin/env bash
# device call 2: where fp32 dlrm_interaction's forward spends its time (0.35 ms at 65536 x 26 x 16
# against 0.057 for fp16): ncu's speed-of-light, warp-state and memory sections of each launch
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=benchmarks/results/2026-11-24-h100-5/call2
which ncu; date -u
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section LaunchStats --section InstructionStats \
  -k regex:_interaction --launch-skip 1 --launch-skip-before-match 0 \
  python3 $D/probe_fp32.py forward:float32:65536:16:1,32,16,4 forward:float16:65536:16 forward:float32:65536:64:1,32,16,4 \
  backward:float32:65536:16:1,32,16,2 > $OUT/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "==PROF==|error|Error" $OUT/ncu.txt | head; date -u
