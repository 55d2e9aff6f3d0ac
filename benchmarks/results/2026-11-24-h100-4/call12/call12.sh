#!/usr/bin/env bash
# device call 12 of 2026-11-24 (fourth session): (1) the backward grid sweep with the production
# grid (one wave) among the candidates and exact bias-GELU's fp32 backward added; (2) the regression
# gate with its drift correction, live: lora_linear's benchmark against its baselines.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
STEP_TIMEOUT=${TUNE_S:-200} bash benchmarks/gpu_run.sh tune elementwise_backward > /dev/null
grep -E "best|rc=|programs_per_sm" $OUT/log_tune.txt
VERIFY_BUDGET=5 BENCH_BUDGET=90 STEP_TIMEOUT=${BENCH_S:-130} bash benchmarks/gpu_run.sh bench lora2 lora_linear > /dev/null
grep -E "regression|improvement|drift|nightly rc" $OUT/log_bench_lora2.txt | head -20
