#!/usr/bin/env bash
# Call 10: every unit test on the GPU, as a GPU runner's pytest -n auto runs them (call 9 found the
# benchmark runner's tests passing CPU tensors to the kernels there).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout -s INT 300 python3 -m pytest -n 16 -q -p no:cacheprovider -p no:benchmark tests/unit > $OUT/log_unit.txt 2>&1
echo "rc=$?" >> $OUT/log_unit.txt
grep -E "^FAILED|^ERROR|passed|failed|rc=" $OUT/log_unit.txt | tail -25
