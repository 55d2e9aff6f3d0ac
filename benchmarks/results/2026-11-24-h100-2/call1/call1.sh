#!/usr/bin/env bash
# device call 1 of 2026-11-24 (second session): the stride probe under memcheck, two property profiles, verify
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p $OUT/san
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for mode in raw fixed; do
  timeout 90 $san --tool memcheck --print-limit 5 python3 benchmarks/results/2026-11-24-h100/call7/probe_flash_stride.py $mode > $OUT/san/$mode.txt 2>&1
  echo "$mode rc=$? $(grep -m1 -E 'Invalid|ERROR SUMMARY' $OUT/san/$mode.txt)" >> $OUT/san/summary.txt
done
cat $OUT/san/summary.txt
timeout 90 python3 benchmarks/profile_property.py $OUT/prof_dropout_f32.txt dropout_add_norm float32 dropout 6 > /dev/null 2>&1; echo "prof1 rc=$?"
timeout 90 python3 benchmarks/profile_property.py $OUT/prof_flash_guards_f16.txt flash_attention float16 guards 6 > /dev/null 2>&1; echo "prof2 rc=$?"
head -3 $OUT/prof_*.txt
TESTS="$(cat call1_tests.txt)" STEP_TIMEOUT=${VERIFY_S:-300} bash benchmarks/gpu_run.sh verify
