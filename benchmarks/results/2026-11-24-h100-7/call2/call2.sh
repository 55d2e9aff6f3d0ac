#!/usr/bin/env bash
# device call 2: the column-block norm backward at call 1's best tile. (1) the norm tile unit tests;
# (2) the three norm ops' kernel tests and the faults, nightly profile; (3) tune_rows.py
# norm_backward_columns around call 1's best (more programs, fewer rows) and
# norm_backward_columns_from (rows of 2048-8192 in column blocks); (4) harness nightly's benchmark
# of the three ops with the regression gate.
C=benchmarks/results/2026-11-24-h100-7/call2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_norm_tiles.py 2>&1 | tail -2
STEP_TIMEOUT=170 TESTS="tests/test_kernels.py tests/test_faults.py" bash benchmarks/gpu_run.sh verify -k "layer_norm or rms_norm or dropout_add_norm" > /dev/null
grep -E "FAILED|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
STEP_TIMEOUT=120 bash benchmarks/gpu_run.sh tune norm_backward_columns norm_backward_columns_from > /dev/null
grep -v Warn $OUT/log_tune.txt | grep -E "backward|rc=" 
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=100 STEP_TIMEOUT=130 bash benchmarks/gpu_run.sh bench norms layer_norm rms_norm dropout_add_norm > /dev/null
tail -12 $OUT/log_bench_norms.txt | cut -c1-400
date -u
