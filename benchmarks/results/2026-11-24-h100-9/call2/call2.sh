#!/usr/bin/env bash
# Call 2: dlrm_interaction's fp32 backward on fp64 outer products (call 1's nightly found the fp32
# partial sums at 4.3x the envelope). (1) the split, rounding and DLRM unit tests on the GPU;
# (2) harness nightly's dlrm benchmark with the regression gate; (3) every fp32 backward property
# and determinism, nightly, 6 shards each; (4) the backward's tilings.
C=benchmarks/results/2026-11-24-h100-9/call2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 110 python3 -m pytest -q -n 8 -p no:cacheprovider tests/unit/test_split_gram.py tests/unit/test_dlrm_paths.py \
  tests/unit/test_dlrm_tiles.py tests/unit/test_dlrm_backward_rounding.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
grep -E "FAILED|Error|passed|failed|rc=" $OUT/log_unit.txt | tail -8; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=110 bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "dlrm_interaction .*(triton|compile) " $OUT/log_bench_dlrm.txt | head -24
grep -E "regression|improvement" $OUT/log_bench_dlrm.txt | tail -12
tar czf $OUT/dlrm.tgz -C $OUT dlrm && rm -r $OUT/dlrm
date -u
CASE=dlrm_interaction-triton-float32 CHECKS="backward determinism" SHARDS=6 STEP_TIMEOUT=170 \
  bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert|OVER" $OUT/log_verify-shards.txt | head -30
date -u
timeout 120 python3 $C/probe_bwd32.py $OUT/bwd32.json 2>&1 | grep -v "Warn\|warn"
date -u
