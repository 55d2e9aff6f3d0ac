#!/usr/bin/env bash
# device call 1 of 2026-11-24 (fourth session): where linear_act's forward+backward spends its GPU
# time (0.27-0.93x torch.compile), kernel by kernel, beside eager and compile.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout 480 python3 benchmarks/profile_bench.py $OUT/profile_linear_act.txt linear_act forward_backward > $OUT/log.txt 2>&1
echo "rc=$?" >> $OUT/log.txt
tail -5 $OUT/log.txt
grep -E "^===|^---|Self CUDA time total" $OUT/profile_linear_act.txt
