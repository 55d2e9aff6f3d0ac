#!/usr/bin/env bash
# device call 11 of 2026-11-24 (third session): the norms' launch tests again, with the split-scale
# test building its tensors on the kernels' device (in call 10 it built them on the CPU and the
# kernel's input check refused them).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -v -p no:xdist -p no:cacheprovider -p no:benchmark tests/unit/test_norm_tiles.py tests/unit/test_tune_rows.py > $OUT/log_unit.txt 2>&1
echo "unit rc=$?" >> $OUT/log_unit.txt
grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|rc=" $OUT/log_unit.txt | tail -40
