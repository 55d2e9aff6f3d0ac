#!/usr/bin/env bash
# Call 9: the re-read's mend (softmax's launch in one place; the fp32-sum diagnostic's reciprocal):
# tune_rows' unit tests (the diagnostics now run in them) and softmax's kernel tests, ci profile.
C=benchmarks/results/2026-11-24-h100-11/call9
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_tune_rows.py tests/unit/test_even_tiles.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=150 bash benchmarks/gpu_run.sh verify -k softmax > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -4
date -u
