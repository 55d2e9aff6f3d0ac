#!/usr/bin/env bash
# device call 7: call 6's failing dropout_add_norm case, step by step on the GPU (probe_overflow.py),
# and its repro.
C=benchmarks/results/2026-11-24-h100-7/call7
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; date -u
timeout 100 python3 $C/probe_overflow.py 2>&1 | grep -v Warn
tar xzf benchmarks/results/2026-11-24-h100-7/call6/repros.tgz
timeout 100 python3 .harness/repros/dropout_add_norm-triton-backward-float16-8049eba5dd.py 2>&1 | tail -4
