#!/usr/bin/env bash
# device call 6: the final norm backward (call 2's kernels). (1) the norm tile and statistics unit
# tests; (2) every check of the three norm ops but the forward-only ones, nightly profile, with time
# to finish (call 3 ran out at 330 s).
C=benchmarks/results/2026-11-24-h100-7/call6
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_norm_tiles.py tests/unit/test_norm_stats.py 2>&1 | tail -2
STEP_TIMEOUT=480 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "(layer_norm or rms_norm or dropout_add_norm) and not forward and not guards" > /dev/null
grep -E "FAILED|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
