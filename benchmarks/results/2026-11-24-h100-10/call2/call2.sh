#!/usr/bin/env bash
# Call 2: the fp32 activations after call 1 (exp_wide on a degree-7 fit with one scaling, no
# select past erfc's fit, exact gelu's own forward tile). (1) the helpers' unit tests; (2) every
# fp32 property of the activation kernels, nightly; (3) exact gelu's fp32 forward tile swept
# (bias_gelu and GEGLU); (4) harness nightly's benchmark of the activation kernels with the gate.
C=benchmarks/results/2026-11-24-h100-10/call2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/test_wide_math.py tests/unit/test_tune_rows.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -3 $OUT/log_unit.txt; date -u
STEP_TIMEOUT=200 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify \
  -k "float32 and (bias_gelu or glu or add_mul_act or linear_act)" > /dev/null
grep -E "passed|failed|FAILED|rc=" $OUT/log_verify.txt | tail -12
date -u
STEP_TIMEOUT=120 bash benchmarks/gpu_run.sh tune elementwise_erf > /dev/null
grep -E "best|^   " $OUT/log_tune.txt | head -40
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=170 STEP_TIMEOUT=230 bash benchmarks/gpu_run.sh bench act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E "(bias_gelu|glu|glu_packed|add_mul_act) .*(triton|compile) " $OUT/log_bench_act.txt | head -40
grep -E "regression|improvement" $OUT/act/summary.md | head -30
tar czf $OUT/act.tgz -C $OUT act && rm -r $OUT/act
date -u
