#!/usr/bin/env bash
# Call 1: dlrm_interaction's fp32 forward on split_gram. (1) the split and DLRM unit tests on the
# GPU (the tile test compiles with this machine's Triton: spills and chained dots); (2) the forward's
# tilings at one and two samples a program; (3) every fp32 forward and backward property, nightly,
# 6 shards each (the backward's nightly check never finished in one process); (4) harness nightly's
# dlrm benchmark with the regression gate.
C=benchmarks/results/2026-11-24-h100-9/call1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider tests/unit/test_split_gram.py tests/unit/test_dlrm_paths.py \
  tests/unit/test_dlrm_tiles.py tests/unit/test_dlrm_partials.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -4 $OUT/log_unit.txt; date -u
timeout 120 python3 $C/probe_fwd32_warps.py $OUT/fwd32_warps.json 2>&1 | grep -v "Warn\|warn"
date -u
CASE=dlrm_interaction-triton-float32 CHECKS="forward backward" SHARDS=6 STEP_TIMEOUT=200 \
  bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert" $OUT/log_verify-shards.txt | head -30
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=110 bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "dlrm_interaction .*(triton|compile) " $OUT/log_bench_dlrm.txt | head -24
grep -E "regression|improvement" $OUT/dlrm/summary.md | head -20
tar czf $OUT/dlrm.tgz -C $OUT dlrm && rm -r $OUT/dlrm
date -u
