#!/usr/bin/env bash
# device call 6 of 2026-11-24 (second session): the two faulting nightly cases of flash_attention's
# backward (call 6 of the first session: v strides (1, 1, 1, 1); call 2: head_dim strides 0) under
# memcheck with each launch fix on or off
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
here=benchmarks/results/2026-11-24-h100-2
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
mkdir -p $OUT/san
for repro in $here/call6/flash_attention-triton-backward-bfloat16-d876ab8493.py $here/call2/flash_attention-triton-backward-bfloat16-a4e7faf1fe.py; do
  for mode in raw strides inner fixed; do
    name=$(basename $repro .py | sed 's/.*-//')-$mode
    timeout 100 $san --tool memcheck --print-limit 3 python3 $here/call6/probe_flash_fixes.py $mode $repro > $OUT/san/$name.txt 2>&1 &
  done
done
wait
for f in $OUT/san/*.txt; do echo "$(basename $f .txt): $(grep -m1 -E 'Invalid' $f) $(grep -m1 'ERROR SUMMARY' $f) $(grep -m1 -E 'passed|FAILED' $f)"; done
tar czf $OUT/san.tgz -C $OUT san && rm -r $OUT/san
