#!/usr/bin/env bash
# Call 3: the benchmark sweeps of the row kernels and the DLRM and n-gram kernels under the reading
# L2 flush (harness nightly, ci-profile smoke verification first); their baselines are re-recorded
# from these runs. Also the timing and baseline unit tests on the GPU.
C=benchmarks/results/2026-11-24-h100-12/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_baseline.py tests/unit/test_bench_runner.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=320 STEP_TIMEOUT=370 bash benchmarks/gpu_run.sh bench rows softmax layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench" $OUT/log_bench_rows.txt | cut -c1-200 | tail -5; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=110 STEP_TIMEOUT=150 bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction dlrm_embedding ngram_block > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench" $OUT/log_bench_dlrm.txt | cut -c1-200 | tail -5; date -u
