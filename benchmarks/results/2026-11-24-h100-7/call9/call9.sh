#!/usr/bin/env bash
# device call 9: the final code after the review's fixes (comments, placeholders, sweep targets;
# no launch changes): the norm and reference unit tests and the three norm ops' kernel tests, ci profile.
C=benchmarks/results/2026-11-24-h100-7/call9
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/unit/test_norm_tiles.py tests/unit/test_norm_stats.py tests/unit/test_references.py 2>&1 | tail -2
PROFILE=ci STEP_TIMEOUT=150 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify -k "layer_norm or rms_norm or dropout_add_norm" > /dev/null
grep -E "FAILED|passed|failed|rc=" $OUT/log_verify.txt | tail -4
date -u
