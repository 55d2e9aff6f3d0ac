#!/usr/bin/env bash
# Call 4: (1) the elementwise backwards' programs per SM swept again (bias_gelu's exact fp32
# backward now does a third less fp64 work); (2) harness nightly's benchmark of the activation
# kernels on the final code, with the gate against the earlier baselines (call 2's results
# archive was lost: its script overwrote it; its log keeps the tables and the gate's lines).
C=benchmarks/results/2026-11-24-h100-10/call4
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
STEP_TIMEOUT=150 bash benchmarks/gpu_run.sh tune elementwise_backward > /dev/null
grep -E "best" $OUT/log_tune.txt | head -20
date -u
VERIFY_BUDGET=5 BENCH_BUDGET=170 STEP_TIMEOUT=230 bash benchmarks/gpu_run.sh bench act bias_gelu glu glu_packed add_mul_act > /dev/null
grep -E "(bias_gelu|glu|glu_packed|add_mul_act) .*(triton|compile) " $OUT/log_bench_act.txt | grep float32
tail -12 $OUT/log_bench_act.txt
date -u
