#!/usr/bin/env bash
# device call 10 of 2026-11-24 (third session), on the final backward code (the loop without
# prefetch converts as it loads again, as before prefetch existed): the norms' launch tests,
# including prefetch on and off bitwise at 4096x1024 with one program per SM, and the three norm
# kernels' properties in the ci profile.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:xdist -p no:cacheprovider -p no:benchmark tests/unit/test_norm_tiles.py tests/unit/test_tune_rows.py > $OUT/log_unit.txt 2>&1
echo "unit rc=$?" >> $OUT/log_unit.txt
tail -n 15 $OUT/log_unit.txt
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-240} TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify --kernels layer_norm,rms_norm,dropout_add_norm > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
