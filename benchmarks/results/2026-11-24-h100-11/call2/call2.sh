#!/usr/bin/env bash
# Call 2: (1) probe_softmax_even.py (softmax's forward masked and unmasked, short-row tilings at
# 32768 x 128 fp32, beside compile and a copy); (2) harness nightly's norm benchmarks with the
# gate (the forward's vectors in the tile's layout); (3) the unit tests these changes touch; (4)
# softmax's and the norms' kernel tests, ci profile.
C=benchmarks/results/2026-11-24-h100-11/call2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 200 python3 $C/probe_softmax_even.py $OUT/even.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
python3 -c "
import json
for r in json.load(open('$OUT/even.json')):
    print(r['shape'], r['dtype'], 'all bitwise same:', all(r['bitwise_same_as_masked'].values()))
    print('  ', list(r['median_ms'].items())[:8])
"
tail -1 $OUT/log_probe.txt; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=150 bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "(layer_norm|rms_norm) .* forward .*(triton|compile) " $OUT/log_bench_norms.txt | cut -c1-150
grep -E "regression|improvement|nightly rc" $OUT/log_bench_norms.txt | cut -c1-130 | head -30
date -u
timeout 100 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_even_tiles.py tests/unit/test_norm_forward_only.py \
  tests/unit/test_norm_tiles.py tests/unit/test_norm_stats.py tests/unit/test_wide_math.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=140 bash benchmarks/gpu_run.sh verify -k "softmax or layer_norm or rms_norm or dropout_add_norm" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
