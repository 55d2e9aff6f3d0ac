#!/usr/bin/env bash
# Call 5: the elementwise tiles in question at 100 repetitions (probe_tiles.py); nightly-profile
# verification of bias_gelu and glu, whose kernels now take their tiles in column-block order.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 200 python3 benchmarks/results/2026-11-24-h100-8/call5/probe_tiles.py $OUT/tiles.json > $OUT/log_tiles.txt 2>&1
echo "rc=$?" >> $OUT/log_tiles.txt
grep -E "best|rc=" $OUT/log_tiles.txt
TESTS=tests/test_kernels.py STEP_TIMEOUT=320 bash benchmarks/gpu_run.sh verify -k "(bias_gelu or glu) and not glu_packed" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -12
