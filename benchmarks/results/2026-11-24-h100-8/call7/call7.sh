#!/usr/bin/env bash
# Call 7: the norms' benchmark with the no-graph forward leaving its statistics unwritten (the
# gate against 2026-11-24-h100-7's baselines); the norm unit tests on the GPU; the elementwise
# forward tiling for fp32 (probe_tiles_fp32.py).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=140 bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "regression|improvement|nightly rc|not run" $OUT/log_bench_norms.txt | cut -c1-220 | head -30
timeout 100 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_norm_forward_only.py tests/unit/test_norm_tiles.py \
  tests/unit/test_norm_stats.py tests/unit/test_references.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt
timeout 250 python3 benchmarks/results/2026-11-24-h100-8/call7/probe_tiles_fp32.py $OUT/tiles_fp32.json > $OUT/log_tiles.txt 2>&1
echo "rc=$?" >> $OUT/log_tiles.txt
grep -E "best|rc=" $OUT/log_tiles.txt
