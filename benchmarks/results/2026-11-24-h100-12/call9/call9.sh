#!/usr/bin/env bash
# Call 9: the review's fixes: dlrm_embedding's reference with its table tensors kept per device (its
# per-call host-to-device copy synchronised); its kernel tests, ci profile, and its sweep (eager
# re-measured); the numerics and baseline unit tests.
C=benchmarks/results/2026-11-24-h100-12/call9
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_numerics.py tests/unit/test_baseline.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=80 bash benchmarks/gpu_run.sh verify -k dlrm_embedding > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -3; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=100 STEP_TIMEOUT=130 bash benchmarks/gpu_run.sh bench emb dlrm_embedding > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench|rror" $OUT/log_bench_emb.txt | cut -c1-200 | tail -5; date -u
