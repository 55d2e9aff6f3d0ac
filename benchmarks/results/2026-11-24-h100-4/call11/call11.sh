#!/usr/bin/env bash
# device call 11 of 2026-11-24 (fourth session): lora_linear's benchmark with the bare base matmul
# (cuBLAS x @ W^T, and its grad x) timed beside it: the fused low-rank path's overhead, measured.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u
VERIFY_BUDGET=5 BENCH_BUDGET=120 STEP_TIMEOUT=${BENCH_S:-170} bash benchmarks/gpu_run.sh bench lora lora_linear > /dev/null
grep -E " triton |base_matmul|regression|improvement|nightly rc" $OUT/log_bench_lora.txt | head -30
