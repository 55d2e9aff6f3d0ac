#!/usr/bin/env bash
# device call 3 of 2026-11-24 (third session): (1) the benchmark sweep of LayerNorm, RMSNorm and
# dropout-add-norm (forward+backward with dropout-add-norm's new forward tiling; baselines);
# (2) sweep the norms' backward grid (programs per SM) with the partial rows summed by the
# module's kernel or by torch.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
VERIFY_BUDGET=10 BENCH_BUDGET=280 STEP_TIMEOUT=${BENCH_S:-350} bash benchmarks/gpu_run.sh bench rows layer_norm rms_norm dropout_add_norm > /dev/null
grep -E "forward .* triton |forward_backward .* triton |regression|improvement|nightly rc" $OUT/log_bench_rows.txt | head -60
STEP_TIMEOUT=${TUNE_S:-170} bash benchmarks/gpu_run.sh tune norm_backward_groups > /dev/null
grep -E "best|rc=" $OUT/log_tune.txt
