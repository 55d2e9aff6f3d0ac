#!/usr/bin/env bash
# Call 8: every kernel's tests and the fault tests, ci profile, on this session's harness (timing,
# baselines, block-wise judging, dlrm_embedding's reference); then LayerNorm's tilings under the
# reading flush at the sweep shapes (its 2048 x 8192 and 1024 x 16384 forwards are at 89% and 82% of
# copy bandwidth) and the wide-row split.
C=benchmarks/results/2026-11-24-h100-12/call8
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
PROFILE=ci STEP_TIMEOUT=300 bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -6; date -u
STEP_TIMEOUT=120 bash benchmarks/gpu_run.sh tune layer_norm_wide layer_norm > /dev/null
grep -E "^layer_norm .*best|rc=" $OUT/log_tune.txt | cut -c1-260; date -u
