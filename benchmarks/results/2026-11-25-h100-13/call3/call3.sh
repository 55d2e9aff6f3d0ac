#!/usr/bin/env bash
# Call 3: the nightly profile (150 examples a property) on the final kernel code, the activation and matmul-epilogue kernels.
C=benchmarks/results/2026-11-25-h100-13/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
TESTS="tests/test_kernels.py" STEP_TIMEOUT=530 bash benchmarks/gpu_run.sh verify --kernels add_mul_act,bias_gelu,glu,glu_packed,linear_act,lora_linear > /dev/null
grep -cE " PASSED" $OUT/log_verify.txt; grep -E " (FAILED|ERROR)|passed|failed|rc=" $OUT/log_verify.txt | cut -c1-220 | tail -25; date -u
