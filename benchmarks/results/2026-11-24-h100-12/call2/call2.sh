#!/usr/bin/env bash
# Call 2: the L2 flush's write-backs (probe_flush.py).
C=benchmarks/results/2026-11-24-h100-12/call2
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 400 python3 $C/probe_flush.py $OUT/flush.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v -i warn $OUT/log_probe.txt | cut -c1-600
date -u
