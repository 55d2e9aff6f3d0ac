#!/usr/bin/env bash
# Call 3: dlrm_interaction's fp32 backward on split products (exact bf16-piece products on the
# tensor cores, 16 rows of Z a head; call 2's fp64 outer products were 3.2x slower). (1) the split,
# backward-error and DLRM tile unit tests on the GPU; (2) the worst errors of forward and backward
# against eager's, in eps of the terms; (3) harness nightly's dlrm benchmark with the gate;
# (4) every fp32 backward property and determinism, nightly, 6 shards each; (5) the backward's tilings.
C=benchmarks/results/2026-11-24-h100-9/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 110 python3 -m pytest -q -n 8 -p no:cacheprovider tests/unit/test_split_products.py tests/unit/test_dlrm_paths.py \
  tests/unit/test_dlrm_tiles.py tests/unit/test_dlrm_backward_error.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
grep -E "^E .*eps|FAILED|Error|passed|failed|rc=" $OUT/log_unit.txt | tail -10; date -u
timeout 60 python3 $C/probe_error.py $OUT/error.json 2>&1 | grep -v "Warn\|warn"
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=110 bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "dlrm_interaction .*(triton|compile) " $OUT/log_bench_dlrm.txt | grep float32
grep -E "regression|improvement" $OUT/log_bench_dlrm.txt | tail -8 | cut -c1-260
date -u
CASE=dlrm_interaction-triton-float32 CHECKS="backward determinism" SHARDS=6 STEP_TIMEOUT=150 \
  bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert|OVER" $OUT/log_verify-shards.txt | head -30
date -u
timeout 100 python3 $C/probe_bwd32.py $OUT/bwd32.json 2>&1 | grep -v "Warn\|warn"
date -u
