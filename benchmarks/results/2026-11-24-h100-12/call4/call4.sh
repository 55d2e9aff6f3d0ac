#!/usr/bin/env bash
# Call 4: under the reading L2 flush, (1) the norms' short-row forward tilings (where compile stays
# 2-4% ahead) and softmax's tilings, beside compile and a copy; (2) the sweeps of call 3 that its
# budget cut (dlrm_embedding's fp32 shapes, ngram_block) and lora_linear's.
C=benchmarks/results/2026-11-24-h100-12/call4
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
STEP_TIMEOUT=170 bash benchmarks/gpu_run.sh tune norm_forward_short softmax > /dev/null
grep -E "^(layer_norm|rms_norm|softmax) .*best|rc=" $OUT/log_tune.txt | cut -c1-260; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=150 STEP_TIMEOUT=190 bash benchmarks/gpu_run.sh bench rest dlrm_embedding ngram_block lora_linear > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench" $OUT/log_bench_rest.txt | cut -c1-200 | tail -5; date -u
