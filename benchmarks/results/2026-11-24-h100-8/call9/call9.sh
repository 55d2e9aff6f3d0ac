#!/usr/bin/env bash
# Call 9: the final code. Nightly-profile verification of the elementwise kernels (bias_gelu, glu,
# glu_packed, add_mul_act's Triton kernel: their final tiles), then the norm kernels' tests (ci
# profile) and the unit tests the session touched, on the GPU.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TESTS=tests/test_kernels.py STEP_TIMEOUT=330 bash benchmarks/gpu_run.sh verify -k "bias_gelu or glu or (add_mul_act and triton)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -12
HARNESS_PROFILE=ci timeout -s INT 120 python3 -m pytest -n 16 -q -p no:cacheprovider -p no:benchmark tests/test_kernels.py \
  -k "norm" > $OUT/log_norms.txt 2>&1; echo "rc=$?" >> $OUT/log_norms.txt
tail -2 $OUT/log_norms.txt
timeout 100 python3 -m pytest -q -p no:cacheprovider -p no:benchmark tests/unit/test_norm_forward_only.py \
  tests/unit/test_tune_rows.py tests/unit/test_bench_runner.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -2 $OUT/log_unit.txt
