#!/usr/bin/env bash
# device call 4: (1) the whole kernel suite, the fault tests, the row-layout and CUDA-extension unit
# tests in the ci profile (one-group row layouts without division, c7d9f0d, touch every row kernel
# and the CUDA add_mul_act); (2) every fp32 dlrm_interaction property in the nightly profile on the
# final tiles, 3 seeded shards each; (3) harness nightly's dlrm benchmark with the regression gate.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
PROFILE=ci JOBS=16 STEP_TIMEOUT=${CI_S:-230} \
  TESTS="tests/test_kernels.py tests/test_faults.py tests/unit/test_row_layout.py tests/unit/test_cuda_extension.py" \
  bash benchmarks/gpu_run.sh verify > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -20
T=tests/test_kernels.py::test_kernel
TESTS="$(for c in forward backward unwritten guards determinism contract; do echo -n "$T[dlrm_interaction-triton-float32-$c] "; done)" \
  SHARDS=3 STEP_TIMEOUT=${SHARD_S:-170} bash benchmarks/gpu_run.sh verify-shards > /dev/null
for file in $OUT/shards/*.txt; do grep -q "1 passed" $file || { echo "== $file"; tail -n 30 $file; }; done
grep -E "shards|passed|failed|error" $OUT/log_verify-shards.txt
tar czf $OUT/shards.tgz -C $OUT shards && rm -r $OUT/shards
VERIFY_BUDGET=5 BENCH_BUDGET=80 STEP_TIMEOUT=${BENCH_S:-110} bash benchmarks/gpu_run.sh bench dlrm dlrm_interaction > /dev/null
grep -E "regression|improvement|drift|nightly rc|float32 .* (triton|compile) " $OUT/log_bench_dlrm.txt | head -30
tar czf $OUT/dlrm.tgz -C $OUT dlrm && rm -r $OUT/dlrm
date -u
