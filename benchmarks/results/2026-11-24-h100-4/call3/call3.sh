#!/usr/bin/env bash
# device call 3 of 2026-11-24 (fourth session): linear_act's forward loading its tiles through TMA
# descriptors (with and without the epilogue split in column halves) against the pointer kernel's
# best tiles of call 2 and torch.compile (cuBLAS + Inductor's activation), z saved or not.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
timeout ${TUNE_S:-420} python3 benchmarks/tune_matmul.py $OUT/tune_matmul.json > $OUT/log_tune_matmul.txt 2>&1
echo "tune rc=$?" >> $OUT/log_tune_matmul.txt
grep -v Warning $OUT/log_tune_matmul.txt | tail -40
