#!/usr/bin/env bash
# Call 14: the final code. dlrm_interaction's fp32 backward warps by tile: its tile and path unit
# tests (ptxas with this machine's Triton) and its kernel tests (ci profile); the whole kernel
# suite's forward checks (ci profile) in what time is left.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -n 8 -q -p no:cacheprovider -p no:benchmark tests/unit/test_dlrm_tiles.py tests/unit/test_dlrm_paths.py \
  tests/unit/test_dlrm_partials.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
grep -E "^FAILED|passed|failed|rc=" $OUT/log_unit.txt | tail -5
HARNESS_PROFILE=ci timeout -s INT 200 python3 -m pytest -n 16 -q -p no:cacheprovider -p no:benchmark tests/test_kernels.py \
  -k "dlrm_interaction" > $OUT/log_dlrm.txt 2>&1; echo "rc=$?" >> $OUT/log_dlrm.txt
grep -E "^FAILED|passed|failed|rc=" $OUT/log_dlrm.txt | tail -5
