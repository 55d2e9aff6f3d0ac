#!/usr/bin/env bash
# device call 7 of 2026-11-24 (fourth session): nightly-profile verification of glu_packed and
# add_mul_act's Triton kernel (the activations' reciprocal), then the ci profile of the kernels whose
# launchers now take the SM count from one place (flash_attention, ngram_block, the norms).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
TESTS=tests/test_kernels.py STEP_TIMEOUT=${VERIFY_S:-330} bash benchmarks/gpu_run.sh verify -k "glu_packed or (add_mul_act and triton)" > /dev/null
grep -E "PASSED|FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | sed 's/.*test_kernel\[/[/' | tail -40
mv $OUT/log_verify.txt $OUT/log_verify_nightly.txt
PROFILE=ci TESTS=tests/test_kernels.py STEP_TIMEOUT=${CI_S:-200} bash benchmarks/gpu_run.sh verify -k "flash_attention or ngram_block or layer_norm or rms_norm" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -20
