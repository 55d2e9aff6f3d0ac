#!/usr/bin/env bash
# Call 10: the norms' short-row gap to compile, launched directly and from CUDA graphs.
C=benchmarks/results/2026-11-24-h100-12/call10
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 200 python3 $C/probe_graph_short.py $OUT/graph.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v -i warn $OUT/log_probe.txt | tail -8 | cut -c1-400
date -u
