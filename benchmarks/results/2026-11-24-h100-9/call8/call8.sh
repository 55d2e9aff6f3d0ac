#!/usr/bin/env bash
# Call 8: the code after the review of the session's change (renames and a shared reshape in the
# DLRM kernels; new and stronger tests). (1) the DLRM, split-product and norm unit tests on the GPU;
# (2) dlrm_interaction's and the norms' kernel tests, ci profile; (3) tune_dlrm.py's backward with
# its compiled peer (probe_tune_peers.py).
C=benchmarks/results/2026-11-24-h100-9/call8
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/unit/test_split_products.py tests/unit/test_dlrm_paths.py \
  tests/unit/test_dlrm_tiles.py tests/unit/test_dlrm_backward_error.py tests/unit/test_norm_even_tiles.py \
  tests/unit/test_norm_forward_only.py > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
grep -E "^E .*eps|FAILED|passed|failed|rc=" $OUT/log_unit.txt | tail -10; date -u
PROFILE=ci STEP_TIMEOUT=150 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify -k "dlrm_interaction or layer_norm or rms_norm or dropout_add_norm" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -5; date -u
timeout 120 python3 $C/probe_tune_peers.py $OUT/tune_peers.json 2>&1 | grep -v "Warn\|warn" | tail -8
date -u
