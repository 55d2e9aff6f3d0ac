#!/usr/bin/env bash
# device call 1: the norms' backward for rows wider than one block in column blocks (f86d7cc).
# (1) the norm tile and statistics unit tests on the GPU; (2) the three norm ops' kernel tests, ci
# profile; (3) tune_rows.py norm_backward_columns (column block, rows a tile, threads, programs per
# SM at 1024 x 16384 bf16, three ops); (4) harness nightly's benchmark of the three ops with the
# regression gate against the baselines.
C=benchmarks/results/2026-11-24-h100-7/call1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/unit/test_norm_tiles.py tests/unit/test_norm_stats.py 2>&1 | tail -3
PROFILE=ci STEP_TIMEOUT=150 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify -k "layer_norm or rms_norm or dropout_add_norm" > /dev/null
grep -E "FAILED|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
STEP_TIMEOUT=230 bash benchmarks/gpu_run.sh tune norm_backward_columns > /dev/null
grep -v Warn $OUT/log_tune.txt | tail -30
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=150 bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "16384.*(triton|compile|eager) " $OUT/log_bench_norms.txt | head -20
tail -25 $OUT/log_bench_norms.txt
date -u
