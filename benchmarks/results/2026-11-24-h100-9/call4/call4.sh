#!/usr/bin/env bash
# Call 4: dlrm_interaction's final code (fp32 backward at 4 warps past 32 columns). (1) every unit
# test on the GPU; (2) harness nightly's dlrm benchmark with the gate (the baselines to record);
# (3) dlrm_interaction's kernel tests, ci profile, every dtype; (4) the fp32 backward-side
# properties, nightly, 4 shards each.
C=benchmarks/results/2026-11-24-h100-9/call4
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 170 python3 -m pytest -q -n 16 -p no:cacheprovider tests/unit > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
grep -E "^E .*eps|FAILED|passed|failed|rc=" $OUT/log_unit.txt | tail -10; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=110 bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "dlrm_interaction .*(triton|compile) " $OUT/log_bench_dlrm.txt | grep float32
grep -E "regression|improvement" $OUT/log_bench_dlrm.txt | tail -8 | cut -c1-200
date -u
PROFILE=ci STEP_TIMEOUT=90 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify -k dlrm_interaction > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -5; date -u
CASE=dlrm_interaction-triton-float32 CHECKS="backward unwritten guards contract" SHARDS=4 STEP_TIMEOUT=150 \
  bash benchmarks/gpu_run.sh verify-shards > /dev/null
grep -E "shards|passed|failed|error|==|Error|assert|OVER" $OUT/log_verify-shards.txt | head -30
date -u
