#!/usr/bin/env bash
# device call 8: dropout_add_norm's reference with RMSNorm as its formula. (1) the reference unit
# tests on the GPU (the row with an infinity); (2) call 6's failing repro; (3) every dropout_add_norm
# check, nightly profile.
C=benchmarks/results/2026-11-24-h100-7/call8
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; date -u
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_references.py 2>&1 | tail -2
tar xzf benchmarks/results/2026-11-24-h100-7/call6/repros.tgz
timeout 100 python3 .harness/repros/dropout_add_norm-triton-backward-float16-8049eba5dd.py 2>&1 | grep -E "passed|FAILED|score" | cut -c1-200
rm -rf .harness/repros
STEP_TIMEOUT=440 TESTS="tests/test_kernels.py tests/test_faults.py" bash benchmarks/gpu_run.sh verify -k "dropout_add_norm" > /dev/null
grep -E "FAILED|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
