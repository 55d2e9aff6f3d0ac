"""Call 5 probe: the elementwise tiling again, in the column-block order, at 100 repetitions (the
sweep's 30 left exact bias-GELU's candidates 6% apart with no pattern, call 3).

    python probe_tiles.py OUT.json

tune_rows.py's elementwise target with its grid cut to the candidates call 3 left in question,
at exact and tanh bias-GELU and SwiGLU's 16-bit peer shapes.
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
    grid={"max_block": (1024, 2048), "target_elems": (1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64)},
    ops=(tune_rows._bias_gelu_op("none", 8192, 16384, torch.bfloat16),
         tune_rows._bias_gelu_op("none", 16384, 3072, torch.float16),
         tune_rows._bias_gelu_op("tanh", 8192, 16384, torch.bfloat16),
         tune_rows._swiglu_op(8192, 14336, torch.bfloat16)))
results = []
for op in target.ops:
    results.append(tune_rows.tune_op(target, op, TimingPlan(repetitions=100)))
    with open(sys.argv[1], "w") as handle:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "triton": triton.__version__, "results": results}, handle, indent=1)
