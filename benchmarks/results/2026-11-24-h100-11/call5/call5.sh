#!/usr/bin/env bash
# Call 5: (1) probe_softmax_rcp.py (softmax's forward before and after the row reciprocal change,
# beside compile and a copy); (2) every unit test; (3) softmax's fp32 kernel tests and every
# softmax forward check, nightly profile.
C=benchmarks/results/2026-11-24-h100-11/call5
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 200 python3 $C/probe_softmax_rcp.py $OUT/rcp.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v "Warn\|warn" $OUT/log_probe.txt | cut -c1-400
date -u
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -p no:benchmark tests/unit > $OUT/log_unit.txt 2>&1; echo "rc=$?" >> $OUT/log_unit.txt
tail -3 $OUT/log_unit.txt; date -u
STEP_TIMEOUT=170 TESTS=tests/test_kernels.py bash benchmarks/gpu_run.sh verify -k "softmax and (float32 or forward)" > /dev/null
grep -E "FAILED|ERROR|passed|failed|rc=" $OUT/log_verify.txt | tail -8
date -u
