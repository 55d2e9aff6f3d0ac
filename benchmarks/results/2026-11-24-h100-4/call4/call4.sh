#!/usr/bin/env bash
# device call 4 of 2026-11-24 (fourth session): linear_act's forward through TMA descriptors, now the
# production path: (1) every launch path forced through the harness's checks on the GPU; (2) the
# persistent TMA variants against the production tiles; (3) the benchmark sweep of linear_act and
# lora_linear (baselines), forward and forward+backward beside eager and torch.compile.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/unit/test_linear_act_launch.py > $OUT/log_launch.txt 2>&1
echo "launch tests rc=$?" >> $OUT/log_launch.txt; tail -15 $OUT/log_launch.txt
timeout ${TUNE_S:-200} python3 benchmarks/tune_matmul.py $OUT/tune_matmul.json > $OUT/log_tune_matmul.txt 2>&1
echo "tune rc=$?" >> $OUT/log_tune_matmul.txt
grep -v Warning $OUT/log_tune_matmul.txt | tail -40
VERIFY_BUDGET=10 BENCH_BUDGET=170 STEP_TIMEOUT=${BENCH_S:-210} bash benchmarks/gpu_run.sh bench mm linear_act lora_linear > /dev/null
grep -E " triton |regression|improvement|nightly rc" $OUT/log_bench_mm.txt | head -40
