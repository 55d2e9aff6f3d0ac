#!/usr/bin/env bash
# Call 6: flash_attention's benchmarks on the final code (the output's second denominator costs one row
# reduction per key block): harness nightly's sweep against sdpa, eager and compile, and the gate
# against the recorded baselines.
C=benchmarks/results/2026-11-25-h100-13/call6
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=200 STEP_TIMEOUT=300 bash benchmarks/gpu_run.sh bench flash flash_attention > /dev/null
grep -E "flash_attention .*(triton|sdpa)|rc=|regression|improvement" $OUT/log_bench_flash.txt | cut -c1-230 | tail -40; date -u
