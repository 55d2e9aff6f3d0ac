"""Call 9 probe of results/2026-11-24-h100-10, rerun unchanged in results/2026-11-24-h100-11 call 1 on the conversion-free exp: softmax's forward on short rows, the one issue 3 shape where torch.compile leads
(32768 x 128 fp32: 0.0167 against 0.0162 ms in the last benchmark). Candidate short-row tilings
(elements a program from one row up to 2048, 8-32 bytes a thread), timed side by side with
production, torch.compile of the reference (as the benchmark runner compiles it: dynamic=False)
and a same-size copy, 300 repetitions, at 32768 x 128 fp32 and at the other short-row peer shape
(8192 x 1024 fp16), which shares the tiling. Outputs compared bitwise with production's. Writes
JSON to argv[1].
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median  # noqa: E402
from harness.bench.timing import time_interleaved  # noqa: E402
import kernels.softmax as softmax  # noqa: E402
import references.softmax as reference  # noqa: E402

device = torch.device("cuda", 0)
production = softmax._GPU_FWD
candidates = {f"t{t}_b{b}": production._replace(target_elems=t, thread_bytes=b)
              for t in (128, 256, 512, 1024, 2048) for b in (8, 16, 32)}
compiled = torch.compile(reference.softmax, dynamic=False)


def with_limits(limits, x):
    softmax._GPU_FWD = limits
    softmax._config.cache_clear()
    try:
        return softmax._forward(x)
    finally:
        softmax._GPU_FWD = production
        softmax._config.cache_clear()


results = []
for rows, cols, dtype in ((32768, 128, torch.float32), (8192, 1024, torch.float16)):
    sets = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
    want = softmax._forward(sets[0])
    launches, calls, same = {}, {}, {}
    for name, limits in candidates.items():
        softmax._GPU_FWD = limits
        softmax._config.cache_clear()
        launch = softmax._config(cols, dtype, False)
        softmax._GPU_FWD = production
        softmax._config.cache_clear()
        key = (launch[0], launch[1]["BLOCK"], launch[1]["num_warps"])
        if key in launches.values():
            continue
        launches[name] = key
        same[name] = bool(torch.equal(with_limits(limits, sets[0]), want))
        calls[name] = (lambda limits: lambda i: with_limits(limits, sets[i]))(limits)
    calls["production"] = lambda i: softmax._forward(sets[i])
    calls["compile"] = lambda i: compiled(sets[i])
    calls["copy"] = lambda i: sets[i].clone()
    times = time_interleaved(calls, device, TimingPlan(warmup=10, repetitions=300, input_sets=3))
    row = {"shape": [rows, cols], "dtype": str(dtype), "launch (rows, block, warps)": {k: list(v) for k, v in launches.items()},
           "bitwise_same": same, "median_ms": {k: round(median(v), 5) for k, v in sorted(times.items(), key=lambda kv: median(kv[1]))}}
    print(json.dumps(row, indent=1))
    results.append(row)
json.dump(results, open(sys.argv[1], "w"), indent=1)
