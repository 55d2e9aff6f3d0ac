"""Call 3 probe: the plain norms' forward with and without writing the row statistics (K, m,
rstd: 12 bytes a row that a forward with no graph never reads), now that the forward's vectors
load in the tile's layout; beside torch.compile of the reference (dynamic=False, as the benchmark
runner compiles it) and a same-size copy, 200 repetitions, at the issue 4 sweep's forward shapes.
Outputs compared bitwise. Writes JSON to argv[1].
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels._norm as norm  # noqa: E402
import references.layer_norm as ref_ln  # noqa: E402
import references.rms_norm as ref_rms  # noqa: E402

device = torch.device("cuda", 0)
shapes = ((65536, 256, torch.bfloat16), (32768, 512, torch.bfloat16), (16384, 1024, torch.bfloat16),
          (16384, 1024, torch.float16), (8192, 2048, torch.bfloat16), (4096, 4096, torch.bfloat16),
          (8192, 4096, torch.bfloat16), (1024, 16384, torch.bfloat16))
results = []
for kind in ("layer_norm", "rms_norm"):
    for rows, cols, dtype in shapes:
        sets = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
        w = torch.randn(cols, device=device, dtype=dtype)
        b = torch.randn(cols, device=device, dtype=dtype)
        if kind == "layer_norm":
            def run(x, stats):
                return norm.forward(x, w, b, eps=1e-5, rms=False, store_stats=stats).y
            compiled = torch.compile(lambda x: ref_ln.layer_norm(x, w, b, 1e-5), dynamic=False)
        else:
            def run(x, stats):
                return norm.forward(x, w, None, eps=1e-6, rms=True, w_offset=1.0, store_stats=stats).y
            compiled = torch.compile(lambda x: ref_rms.rms_norm(x, w, 1e-6, 1.0), dynamic=False)
        same = bool(torch.equal(run(sets[0], True), run(sets[0], False)))
        calls = {"stats": lambda i: run(sets[i], True), "no_stats": lambda i: run(sets[i], False),
                 "compile": lambda i: compiled(sets[i]), "copy": lambda i: sets[i].clone()}
        times = time_interleaved(calls, device, TimingPlan(warmup=10, repetitions=200, input_sets=3))
        med = {k: round(median(v), 5) for k, v in times.items()}
        row = {"kind": kind, "shape": [rows, cols], "dtype": str(dtype), "bitwise_same": same, "median_ms": med,
               "compile_over_stats": round(med["compile"] / med["stats"], 4),
               "compile_over_no_stats": round(med["compile"] / med["no_stats"], 4)}
        print(json.dumps(row))
        results.append(row)
        torch._dynamo.reset()
json.dump(results, open(sys.argv[1], "w"), indent=1)
