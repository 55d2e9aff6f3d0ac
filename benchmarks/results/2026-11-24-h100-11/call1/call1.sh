#!/usr/bin/env bash
# Call 1: softmax's fp32 exp without conversions. (1) the accurate-arithmetic unit tests (the fp32
# exp with the GPU's fused multiply-adds); (2) softmax's kernel and fault tests, ci profile; (3) the
# short-row probe of results/2026-11-24-h100-10 call 9, unchanged, on this code; (4) harness
# nightly's softmax benchmark and the gate against the recorded baselines.
C=benchmarks/results/2026-11-24-h100-11/call1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_wide_math.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -3 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=120 bash benchmarks/gpu_run.sh verify -k softmax > /dev/null
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify.txt | tail -6
date -u
timeout 150 python3 $C/probe_softmax_short.py $OUT/short.json 2>&1 | grep -v "Warn\|warn" | grep -A12 median_ms
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=180 STEP_TIMEOUT=250 bash benchmarks/gpu_run.sh bench softmax softmax > /dev/null
grep -E "softmax .*(triton|compile) " $OUT/log_bench_softmax.txt | head -30
tail -12 $OUT/log_bench_softmax.txt
date -u
