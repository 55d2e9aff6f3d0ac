#!/usr/bin/env bash
# device call 4: the row-sums kernel with its own tile. (1) the norm tile unit tests; (2)
# tune_rows.py norm_backward_row_sums (its column block, rows and threads; the column kernel at
# its production tile) at 1024 x 16384 bf16, three ops.
C=benchmarks/results/2026-11-24-h100-7/call4
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_norm_tiles.py 2>&1 | tail -2
STEP_TIMEOUT=200 bash benchmarks/gpu_run.sh tune norm_backward_row_sums > /dev/null
grep -v Warn $OUT/log_tune.txt | grep -E "backward|rc="
for op in layer_norm rms_norm dropout; do
  grep -v Warn $OUT/log_tune.txt | awk -v op="$op" '$0 ~ "^"op {f=1; next} /^[a-z]/{f=0} f && /bwd_/' | sort -k2 -n | head -5
done
date -u
