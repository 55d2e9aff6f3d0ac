#!/usr/bin/env bash
# Call 1: torch.compile's generated kernels at the short-row shapes where it leads (source, times
# beside ours and a copy, ncu of one launch each).
C=benchmarks/results/2026-11-24-h100-12/call1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 200 python3 $C/probe_compiled_short.py code > $OUT/log_code.txt 2>&1; echo "code rc=$?" >> $OUT/log_code.txt
grep -v -i warn $OUT/log_code.txt | cut -c1-400
date -u
timeout 250 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SchedulerStats python3 $C/probe_compiled_short.py ncu > $OUT/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "==PROF==|rror" $OUT/ncu.txt | head -5
grep -E "^  \S+.*\(|Duration|DRAM Throughput|Registers Per|Achieved Occ|Block Size|Grid Size|Waves Per|Theoretical Occ|No Eligible|Issued Warp|Eligible Warps" $OUT/ncu.txt | head -150
date -u
