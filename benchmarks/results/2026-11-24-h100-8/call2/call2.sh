#!/usr/bin/env bash
# Call 2: the elementwise forwards against one-dimensional and unmasked variants (probe_flat.py);
# ncu's view of four ops, ours against compile's (call 1's probe, its ncu mode); compile's code
# for the norms and softmax.
set -uo pipefail
cd "$(dirname "$0")/../../../.."
D=benchmarks/results/2026-11-24-h100-8
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 200 python3 $D/call2/probe_flat.py $OUT/flat.json > $OUT/log_flat.txt 2>&1; echo "rc=$?" >> $OUT/log_flat.txt
timeout 200 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
  python3 $D/call1/probe_hints.py ncu > /tmp/ncu.txt 2>&1; echo "rc=$?" >> /tmp/ncu.txt
timeout 120 python3 $D/call2/dump_inductor.py /tmp/inductor > /tmp/log_inductor.txt 2>&1
tar czf $OUT/extras.tgz -C /tmp ncu.txt inductor log_inductor.txt
grep -v Warning $OUT/log_flat.txt | tail; tail -3 /tmp/ncu.txt
