#!/usr/bin/env bash
# Call 9: both norms' forward tiling on short rows again, now that even tiles run unmasked
# (tune_rows.py norm_forward_short: rows a program x thread widths at 65536 x 256, 32768 x 512 and
# 16384 x 1024 bf16; results/2026-11-24-h100-5's call 11 found the masked kernel 0-3% from its best).
C=benchmarks/results/2026-11-24-h100-9/call9
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
STEP_TIMEOUT=400 bash benchmarks/gpu_run.sh tune norm_forward_short > /dev/null
grep -vE "Warn|warn" $OUT/log_tune.txt | tail -40
date -u
