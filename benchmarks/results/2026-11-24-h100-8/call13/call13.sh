#!/usr/bin/env bash
# Call 13: dlrm_interaction's fp32 backward at dim 128, 4 and 8 warps (call 12: 4 warps 35% faster
# than production's 2, but 16 bytes spilled with this machine's Triton): spills and times.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TRITON_INTERPRET=0 timeout 100 python3 tests/unit/dlrm_tiles_sm90.py fp32 backward:1,32,128,1,4 backward:1,32,128,1,8 \
  backward:2,32,128,1,8 > $OUT/spills.txt 2>&1; echo "rc=$?" >> $OUT/spills.txt
tail -4 $OUT/spills.txt
cat > /tmp/probe.py <<'PY'
import os, sys, torch
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import tune_dlrm
tune_dlrm.BLOCK_B, tune_dlrm.WARPS = (1, 2), (4, 8)
tune_dlrm.SHAPES[torch.float32] = ((65536, 26, 128),)
tune_dlrm.main(sys.argv[1], torch.float32, "backward")
PY
timeout 150 python3 /tmp/probe.py $OUT/dlrm_fp32_backward_128.json > $OUT/log_probe.txt 2>&1; echo "rc=$?" >> $OUT/log_probe.txt
grep -v Warn $OUT/log_probe.txt | grep -v "warnings.warn" | tail -10
