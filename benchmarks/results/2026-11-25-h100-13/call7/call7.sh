#!/usr/bin/env bash
# Call 7: flash_attention with the rounded probabilities' sum only in a forward that records a graph
# (call 6: in every forward it cost the inference forward 4-29%): its unit tests, every check at
# the nightly profile (with dlrm_interaction's bf16 determinism, unfinished in calls 4 and 5), then
# its benchmarks and the gate.
C=benchmarks/results/2026-11-25-h100-13/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 100 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_attention_weights.py 2>&1 | tail -2 | tee $OUT/log_unit.txt
TESTS="tests/test_kernels.py::test_kernel[flash_attention-triton-float16-forward] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-forward] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-backward] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-backward] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-unwritten] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-unwritten] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-guards] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-guards] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-determinism] tests/test_kernels.py::test_kernel[flash_attention-triton-bfloat16-determinism] tests/test_kernels.py::test_kernel[flash_attention-triton-float16-contract]  tests/test_kernels.py::test_kernel[dlrm_interaction-triton-bfloat16-determinism]" \
  STEP_TIMEOUT=270 bash benchmarks/gpu_run.sh verify > /dev/null
grep -cE " PASSED" $OUT/log_verify.txt; grep -E " (FAILED|ERROR)|passed|failed|rc=|not found" $OUT/log_verify.txt | cut -c1-220 | tail -12; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=150 STEP_TIMEOUT=190 bash benchmarks/gpu_run.sh bench flash flash_attention > /dev/null
grep -E "flash_attention .*(triton|sdpa)|rc=|regression|improvement" $OUT/log_bench_flash.txt | cut -c1-200 | tail -30; date -u
