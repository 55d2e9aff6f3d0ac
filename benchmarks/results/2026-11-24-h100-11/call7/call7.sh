#!/usr/bin/env bash
# Call 7: softmax's fp32 backward with the refined reciprocal. (1) probe_softmax_bwd.py (before and
# after, interleaved); (2) softmax's backward-side checks in every dtype and the fault tests,
# nightly profile; (3) harness nightly's softmax benchmark (the gate against call 6's baselines).
C=benchmarks/results/2026-11-24-h100-11/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 150 python3 $C/probe_softmax_bwd.py $OUT/bwd.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v "Warn\|warn" $OUT/log_probe.txt | cut -c1-400
date -u
STEP_TIMEOUT=200 bash benchmarks/gpu_run.sh verify -k "softmax and (backward or gradcheck or determinism or fault)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=160 bash benchmarks/gpu_run.sh bench softmax softmax > /dev/null
grep -E "softmax .*(triton|compile) " $OUT/log_bench_softmax.txt | awk -F'│' '{print $3,$4,$5,$6,$7,$9,$11,$12}'
grep -E "regression|improvement|nightly rc" $OUT/log_bench_softmax.txt | cut -c1-160
date -u
