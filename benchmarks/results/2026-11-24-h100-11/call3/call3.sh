#!/usr/bin/env bash
# Call 3: (1) probe_norm_stats.py (the plain norms' forward with and without writing the row
# statistics, beside compile and a copy); (2) tune_rows.py norm_forward_short again (rows a program
# x thread widths at 256-1024 columns), now that the forward's vectors load in the tile's layout.
C=benchmarks/results/2026-11-24-h100-11/call3
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HARNESS_COMMIT=$(cat $C/commit.txt)
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 330 python3 $C/probe_norm_stats.py $OUT/stats.json > $OUT/log_probe.txt 2>&1; echo "probe rc=$?" >> $OUT/log_probe.txt
grep -v "Warn\|warn" $OUT/log_probe.txt | cut -c1-400
date -u
STEP_TIMEOUT=200 bash benchmarks/gpu_run.sh tune norm_forward_short > /dev/null
grep -E "best|production|rc=" $OUT/log_tune.txt | head -30
date -u
