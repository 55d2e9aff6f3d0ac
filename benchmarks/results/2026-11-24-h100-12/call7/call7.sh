#!/usr/bin/env bash
# Call 7: the harness changes on the GPU (timing, baselines, block-wise judging: their unit tests);
# dlrm_embedding's sweep with the block-wise re-check (its 26 M-row shape ran out of memory); the
# regression gate's A/B (planted extra pass, A/A rerun) and the perf tests against the baselines
# re-recorded under the reading flush.
C=benchmarks/results/2026-11-24-h100-12/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 110 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_numerics.py tests/unit/test_baseline.py tests/unit/test_bench_runner.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=100 STEP_TIMEOUT=130 bash benchmarks/gpu_run.sh bench emb dlrm_embedding > /dev/null
grep -E "rc=|regression|improvement|interrupted|not bench|rror" $OUT/log_bench_emb.txt | cut -c1-200 | tail -5; date -u
STEP_TIMEOUT=210 bash benchmarks/gpu_run.sh gate > /dev/null
grep -E "rc=|verdict|passed|failed|FAILED|noise" $OUT/log_gate.txt | cut -c1-250 | tail -12; date -u
