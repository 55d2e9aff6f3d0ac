#!/usr/bin/env bash
# Call 8: the norms' checks that call 4's nightly run did not reach (its step stopped at its
# limit): backward, gradcheck, determinism and dropout-add-norm's dropout check, nightly profile,
# on the final code.
C=benchmarks/results/2026-11-24-h100-11/call8
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
STEP_TIMEOUT=420 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "(layer_norm or rms_norm or dropout_add_norm) and not forward and not unwritten and not guards and not contract" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
