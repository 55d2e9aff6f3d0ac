#!/usr/bin/env bash
# Call 11: the re-read's mend (calibration samples filtered once in compare; one timing check):
# the numerics, baseline and runner unit tests, and softmax's and dlrm_embedding's kernel tests, ci profile.
C=benchmarks/results/2026-11-24-h100-12/call11
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_numerics.py tests/unit/test_baseline.py tests/unit/test_bench_runner.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
PROFILE=ci STEP_TIMEOUT=120 bash benchmarks/gpu_run.sh verify -k "softmax or dlrm_embedding" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -3; date -u
