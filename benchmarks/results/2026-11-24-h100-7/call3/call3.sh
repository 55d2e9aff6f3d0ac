#!/usr/bin/env bash
# device call 3: the column kernel walks the column blocks from the last (the row-sums kernel read
# them last, so they may still sit in L2). (1) the norm tile unit tests; (2) every check of the
# three norm ops but the forward-only ones (forward, guards), nightly profile (call 2 ran out of
# time before them); (3) harness nightly's benchmark of the three ops, gated against call 2.
C=benchmarks/results/2026-11-24-h100-7/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_norm_tiles.py 2>&1 | tail -2
STEP_TIMEOUT=330 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "(layer_norm or rms_norm or dropout_add_norm) and not forward and not guards" > /dev/null
grep -E "FAILED|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=100 STEP_TIMEOUT=130 bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "16384.*forward_backward.*(triton|compile|eager) " $OUT/log_bench_norms.txt | cut -c1-200
tail -8 $OUT/log_bench_norms.txt | cut -c1-400
date -u
