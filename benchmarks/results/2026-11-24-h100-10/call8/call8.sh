#!/usr/bin/env bash
# Call 8: ncu of softmax's fp32 forward at 4096 x 32768 and of a same-size copy (the first try,
# ncu_first_try.txt, caught torch.compile's kernel and two fills; the second, with a name filter,
# nothing: ncu_second_try.txt).
C=benchmarks/results/2026-11-24-h100-10/call8
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
ncu --clock-control none --profile-from-start off --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats \
  python3 $C/ncu_softmax32k.py > $OUT/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "==PROF==|rror" $OUT/ncu.txt | head
grep -E "^  \S+.*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occ|Block Size|Grid Size|No Eligible|Issued Warp|Active Warps Per|Eligible Warps|Stall|L2 Hit" $OUT/ncu.txt | head -80
date -u
