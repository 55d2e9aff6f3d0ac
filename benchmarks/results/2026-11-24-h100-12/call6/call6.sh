#!/usr/bin/env bash
# Call 6: dlrm_embedding's out-of-memory benchmark shape (probe_embedding_oom.py).
C=benchmarks/results/2026-11-24-h100-12/call6
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 200 python3 $C/probe_embedding_oom.py > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v -i warn $OUT/log_probe.txt | tail -60 | cut -c1-300
date -u
