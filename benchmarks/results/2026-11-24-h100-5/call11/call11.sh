#!/usr/bin/env bash
# device call 11: the norms' forward tiling at the short rows again (tune_rows.py
# norm_forward_short): the last sweep chose 16-row tiles while every row a thread held cost a
# 64-bit division; without it a smaller tile may win
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
STEP_TIMEOUT=${TUNE_S:-330} bash benchmarks/gpu_run.sh tune norm_forward_short > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
date -u
