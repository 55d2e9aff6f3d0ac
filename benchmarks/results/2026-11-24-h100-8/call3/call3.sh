#!/usr/bin/env bash
# Call 3: the elementwise kernels with their programs in column-block order (a 1-D grid): their
# kernel tests (ci profile), the tiling sweep over the wider grid (tune_rows.py elementwise), and
# the norms' row-sums kernel in column-block order against production (probe_sums_order.py).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
D=benchmarks/results/2026-11-24-h100-8/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
HARNESS_PROFILE=ci timeout -s INT 100 python3 -m pytest -n 16 -q -p no:cacheprovider -p no:benchmark tests/test_kernels.py \
  -k "bias_gelu or glu or add_mul_act" > $OUT/log_tests.txt 2>&1; echo "rc=$?" >> $OUT/log_tests.txt
timeout 320 python3 benchmarks/tune_rows.py $OUT/tune_elementwise.json elementwise > $OUT/log_tune.txt 2>&1; echo "rc=$?" >> $OUT/log_tune.txt
timeout 150 python3 $D/probe_sums_order.py $OUT/sums_order.json > $OUT/log_sums.txt 2>&1; echo "rc=$?" >> $OUT/log_sums.txt
tail -2 $OUT/log_tests.txt; grep -v Warning $OUT/log_tune.txt | tail -25; grep -v Warning $OUT/log_sums.txt | tail -8
