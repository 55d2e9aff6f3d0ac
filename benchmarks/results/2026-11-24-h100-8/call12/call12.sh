#!/usr/bin/env bash
# Call 12: dlrm_interaction's fp32 backward tiles at one sample a program: ptxas spills with this
# machine's Triton (dlrm_tiles_sm90.py) and their times at dims 128, 64 and 16.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TRITON_INTERPRET=0 timeout 120 python3 tests/unit/dlrm_tiles_sm90.py fp32 backward:1,32,128,1,1 backward:1,32,128,1,2 \
  backward:1,32,128,1,4 backward:1,32,64,1,1 backward:1,32,64,1,2 backward:1,32,16,1,1 backward:1,32,16,1,2 \
  > $OUT/spills.txt 2>&1; echo "rc=$?" >> $OUT/spills.txt
cat $OUT/spills.txt | tail -9
timeout 200 python3 benchmarks/results/2026-11-24-h100-8/call12/probe_dlrm_fp32_backward.py $OUT/dlrm_fp32_backward.json > $OUT/log_probe.txt 2>&1
echo "rc=$?" >> $OUT/log_probe.txt
grep -v Warn $OUT/log_probe.txt | grep -v "warnings.warn" | tail -24
