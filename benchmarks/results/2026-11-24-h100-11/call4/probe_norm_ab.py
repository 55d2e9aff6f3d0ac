"""Call 4 probe: an A/B of the norms' forward before and after this session's change (weight,
bias and xbias loaded through the tile's [ROWS, BLOCK] offsets; ``n_cols`` a constant on even
tiles). ``norm_before.py`` is kernels/_norm.py at 16e8f35, imported beside the package (it uses
the package's _rows, whose helpers it calls are unchanged). Call 2's gate flagged dropout-add-norm
16384 x 1024 bf16 3.5% slower and fp16 3.4% faster against the baselines, a split that one code
change is not expected to make; here the two kernels run interleaved in one process, 300
repetitions, at those shapes and at the short-row plain norms. Outputs compared bitwise. Writes
JSON to argv[1].
"""
import importlib.util
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels._norm as after  # noqa: E402

spec = importlib.util.spec_from_file_location("norm_before", os.path.join(HERE, "norm_before.py"))
before = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before)

device = torch.device("cuda", 0)
cases = [("dropout_add_norm", 16384, 1024, torch.bfloat16), ("dropout_add_norm", 16384, 1024, torch.float16),
         ("dropout_add_norm", 65536, 256, torch.bfloat16), ("layer_norm", 65536, 256, torch.bfloat16),
         ("layer_norm", 32768, 512, torch.bfloat16), ("rms_norm", 65536, 256, torch.bfloat16),
         ("rms_norm", 16384, 1024, torch.bfloat16)]
results = []
for kind, rows, cols, dtype in cases:
    sets = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
    res = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
    w, b, xb = (torch.randn(cols, device=device, dtype=dtype) for _ in range(3))

    def call(module, i):
        if kind == "dropout_add_norm":
            return module.forward(sets[i], w, b, eps=1e-5, rms=False, residual=res[i], xbias=xb,
                                  dropout=module.Dropout.of(0.1, 1234), store_stats=False).y
        if kind == "layer_norm":
            return module.forward(sets[i], w, b, eps=1e-5, rms=False).y
        return module.forward(sets[i], w, None, eps=1e-6, rms=True, w_offset=1.0).y

    same = bool(torch.equal(call(before, 0), call(after, 0)))
    times = time_interleaved({"before": lambda i: call(before, i), "after": lambda i: call(after, i),
                              "copy": lambda i: sets[i].clone()},
                             device, TimingPlan(warmup=10, repetitions=300, input_sets=3))
    med = {k: round(median(v), 5) for k, v in times.items()}
    row = {"kind": kind, "shape": [rows, cols], "dtype": str(dtype), "bitwise_same": same, "median_ms": med,
           "after_over_before": round(med["after"] / med["before"], 4)}
    print(json.dumps(row))
    results.append(row)
json.dump(results, open(sys.argv[1], "w"), indent=1)
