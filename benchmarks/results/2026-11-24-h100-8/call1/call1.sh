#!/usr/bin/env bash
# Call 1: cache hints on the streaming forwards (A/B in one process), torch.compile's code for the
# same ops, and ncu's view of three of them (ours against compile's).
set -uo pipefail
cd "$(dirname "$0")/../../../.."
P=benchmarks/results/2026-11-24-h100-8/call1/probe_hints.py
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; date -u; } > $OUT/env.txt 2>&1
timeout 330 python3 $P hints $OUT > $OUT/log_hints.txt 2>&1; echo "rc=$?" >> $OUT/log_hints.txt
timeout 200 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  python3 $P ncu > $OUT/ncu.txt 2>&1; echo "rc=$?" >> $OUT/ncu.txt
tail -3 $OUT/ncu.txt
