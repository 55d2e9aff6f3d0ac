#!/usr/bin/env bash
# device call 3: (1) fp32 dlrm_interaction's backward tile sweep again, its candidates now timed
# without the check's concatenation (call 1 timed it with them); (2) ncu of the norms' forward
# beside torch.compile's kernels at the short rows where compile is ahead (issue 4)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=benchmarks/results/2026-11-24-h100-5/call3
date -u
timeout ${TUNE_S:-150} python3 benchmarks/tune_dlrm.py $OUT/tune_backward32.json float32 backward > $OUT/tune_backward32.txt 2>&1
echo "tune rc=$?"; grep -E "production|Error" $OUT/tune_backward32.txt
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section LaunchStats --section InstructionStats \
  -k regex:"_norm_fwd_kernel|triton_" --launch-skip 4 \
  python3 $D/probe_norm_fwd.py 65536x256:bfloat16 32768x512:bfloat16 16384x1024:float16 > $OUT/ncu_norm.txt 2>&1
echo "ncu rc=$?"; grep -E "^  \S+ \(|Duration|DRAM Throughput|Registers Per|Achieved Occ|Block Size|Grid Size" $OUT/ncu_norm.txt | head -120; date -u
