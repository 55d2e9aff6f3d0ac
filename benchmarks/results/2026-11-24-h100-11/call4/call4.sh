#!/usr/bin/env bash
# Call 4: (1) probe_norm_ab.py (the norms' forward before and after this session's change, one
# process); (2) tune_rows.py's fp32 softmax diagnostics launch with the new EVEN argument; (3)
# harness nightly's softmax benchmark on the final softmax code (baselines); (4) softmax's and the
# norms' kernel tests, nightly profile.
C=benchmarks/results/2026-11-24-h100-11/call4
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 150 python3 $C/probe_norm_ab.py $OUT/ab.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v "Warn\|warn" $OUT/log_probe.txt | cut -c1-300
timeout 60 python3 -c "
import sys, torch; sys.path.insert(0, 'benchmarks')
import tune_rows, kernels.softmax as sm
x = torch.randn(4096, 1024, device='cuda')
want = sm._forward(x)
for name, run in tune_rows._softmax_numerics(x).items():
    print('diagnostic', name, 'max |diff| from production', float((run() - want).abs().max()))
"
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=120 STEP_TIMEOUT=170 bash benchmarks/gpu_run.sh bench softmax softmax > /dev/null
grep -E "softmax .*(triton|compile) " $OUT/log_bench_softmax.txt | awk -F'│' '{print $3,$4,$5,$6,$7,$9,$11,$12}'
grep -E "regression|improvement|nightly rc" $OUT/log_bench_softmax.txt | cut -c1-140
date -u
STEP_TIMEOUT=280 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify -k "softmax or layer_norm or rms_norm or dropout_add_norm" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
