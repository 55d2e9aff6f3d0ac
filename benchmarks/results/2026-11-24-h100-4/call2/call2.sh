#!/usr/bin/env bash
# device call 2 of 2026-11-24 (fourth session): (1) linear_act's forward tile configurations with and
# without the saved z (call 1: the forward kernel 6.7x slower when it stores z; ptxas spills the
# 128 x 256 epilogue); (2) the activation kernels' benchmark sweep after the reciprocal change.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout ${TUNE_S:-300} python3 benchmarks/tune_matmul.py $OUT/tune_matmul.json > $OUT/log_tune_matmul.txt 2>&1
echo "tune rc=$?" >> $OUT/log_tune_matmul.txt
cat $OUT/log_tune_matmul.txt | grep -v Warning | tail -30
VERIFY_BUDGET=10 BENCH_BUDGET=200 STEP_TIMEOUT=${BENCH_S:-240} bash benchmarks/gpu_run.sh bench act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E " forward .* triton |regression|improvement|nightly rc" $OUT/log_bench_act.txt | head -40
