"""Call 7 probe: the elementwise forward tiling for fp32 results, whose activations run in fp64.

    python probe_tiles_fp32.py OUT.json

Call 6 found fp32 exact bias-GELU 23% faster and fp32 SwiGLU 23% faster with 2048 elements a
program (8 warps, 8 elements a thread) than with 4096: the fp64 arithmetic wants more threads in
flight. tune_rows.py's elementwise target, 100 repetitions, over smaller programs and more warps,
at the fp32 peer shapes (and add_mul_act's fp32 relu, which must not regress).
"""

from __future__ import annotations

import json
import os
import sys

import torch
import triton

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import tune_rows  # noqa: E402
from harness.bench.timing import TimingPlan  # noqa: E402

target = tune_rows.TARGETS["elementwise"]._replace(
    grid={"target_elems": (512, 1024, 2048, 4096), "thread_bytes": (8, 16, 32, 64), "max_warps": (8, 16)},
    ops=(tune_rows._bias_gelu_op("none", 4096, 16384, torch.float32),
         tune_rows._bias_gelu_op("tanh", 4096, 16384, torch.float32),
         tune_rows._swiglu_op(4096, 11008, torch.float32),
         tune_rows._add_mul_relu_op(65536, 512, torch.float32)))
results = []
for op in target.ops:
    results.append(tune_rows.tune_op(target, op, TimingPlan(repetitions=60)))
    with open(sys.argv[1], "w") as handle:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "triton": triton.__version__, "results": results}, handle, indent=1)
