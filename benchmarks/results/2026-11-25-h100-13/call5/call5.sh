#!/usr/bin/env bash
# Call 5: flash_attention with its output normalised by the rounded probabilities' sum: the new unit
# tests and the term-hook replays on the GPU; every flash_attention check at the nightly profile; and
# the three checks calls 2 and 4 left unfinished (dlrm_interaction bf16 backward and determinism,
# dropout_add_norm fp32 dropout).
C=benchmarks/results/2026-11-25-h100-13/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_attention_weights.py tests/unit/test_term_hooks.py 2>&1 | tail -3 | tee $OUT/log_unit.txt
K=tests/test_kernels.py::test_kernel
TESTS="tests/test_kernels.py::test_kernel[flash_attention-triton-float16-forward] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-forward] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-backward] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-backward] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-unwritten] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-unwritten] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-guards] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-guards] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-determinism] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-determinism] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-contract] \
$K[dlrm_interaction-triton-bfloat16-backward] $K[dlrm_interaction-triton-bfloat16-determinism] $K[dropout_add_norm-triton-float32-dropout]" \
  STEP_TIMEOUT=350 bash benchmarks/gpu_run.sh verify > /dev/null
grep -cE " PASSED" $OUT/log_verify.txt; grep -E " (FAILED|ERROR)|passed|failed|rc=|not found|no tests" $OUT/log_verify.txt | cut -c1-220 | tail -25; date -u
