#!/usr/bin/env bash
# Call 5: under the reading L2 flush, the sweeps of the elementwise and matmul-epilogue kernels and
# of flash attention; dlrm_embedding's with its single-lookup reference (its 26 M-row fp32 shape
# ran out of memory before), and its kernel tests, ci profile.
C=benchmarks/results/2026-11-24-h100-12/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
PROFILE=ci STEP_TIMEOUT=60 bash benchmarks/gpu_run.sh verify -k dlrm_embedding > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -3; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=90 STEP_TIMEOUT=130 bash benchmarks/gpu_run.sh bench emb dlrm_embedding > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench|rror" $OUT/log_bench_emb.txt | cut -c1-200 | tail -5; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=190 STEP_TIMEOUT=230 bash benchmarks/gpu_run.sh bench ew linear_act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench" $OUT/log_bench_ew.txt | cut -c1-200 | tail -5; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=150 STEP_TIMEOUT=190 bash benchmarks/gpu_run.sh bench flash flash_attention > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench" $OUT/log_bench_flash.txt | cut -c1-200 | tail -5; date -u
