#!/usr/bin/env bash
# Call 6: the activation kernels' benchmark with the forward's new tile (2048 elements a program);
# ncu on the short-row forwards where compile leads.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=benchmarks/results/2026-11-24-h100-8/call6
timeout 150 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis \
  python3 $D/ncu_rows.py > $OUT/ncu.txt 2>&1; echo "rc=$?" >> $OUT/ncu.txt
tail -2 $OUT/ncu.txt
VERIFY_BUDGET=10 BENCH_BUDGET=230 STEP_TIMEOUT=270 bash benchmarks/gpu_run.sh bench act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E "regression|improvement|nightly rc|not run" $OUT/log_bench_act.txt | cut -c1-200 | head -40
