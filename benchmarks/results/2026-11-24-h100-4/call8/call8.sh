#!/usr/bin/env bash
# device call 8 of 2026-11-24 (fourth session): the final code (exact gelu from |z|, the backward
# with grad_bias in one wave, linear_act's forward terms): the launch and term-hook tests on the
# GPU, then nightly-profile verification of linear_act, bias_gelu and glu.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/unit/test_linear_act_launch.py \
  tests/unit/test_term_hooks.py tests/unit/test_resident_programs.py > $OUT/log_unit.txt 2>&1
echo "unit tests rc=$?" >> $OUT/log_unit.txt; tail -4 $OUT/log_unit.txt
TESTS=tests/test_kernels.py STEP_TIMEOUT=${VERIFY_S:-400} bash benchmarks/gpu_run.sh verify -k "linear_act or bias_gelu or (glu and not glu_packed)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -20
