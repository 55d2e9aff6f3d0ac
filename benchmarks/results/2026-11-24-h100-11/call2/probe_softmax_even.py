"""Call 2 probe: softmax's forward with the conversion-free exp, masked and unmasked (EVEN), at
the peer shapes, and the short-row tilings again at 32768 x 128 fp32 (elements a program up to
8192, 16-64 bytes a thread, unmasked), timed side by side with torch.compile of the reference (as
the benchmark runner compiles it: dynamic=False) and a same-size copy, 200 repetitions. Outputs
compared bitwise with production's. Writes JSON to argv[1].
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels.softmax as softmax  # noqa: E402
import references.softmax as reference  # noqa: E402

device = torch.device("cuda", 0)
production_limits, production_even = softmax._GPU_FWD, softmax._EVEN_MAX_BLOCK


def variant(limits, even_max):
    def run(x):
        softmax._GPU_FWD, softmax._EVEN_MAX_BLOCK = limits, even_max
        softmax._config.cache_clear()
        try:
            return softmax._forward(x)
        finally:
            softmax._GPU_FWD, softmax._EVEN_MAX_BLOCK = production_limits, production_even
            softmax._config.cache_clear()
    return run


shapes = ((8192, 1024, torch.float16), (4096, 8192, torch.bfloat16), (32768, 128, torch.float32),
          (4096, 32768, torch.float32), (16384, 4096, torch.float16))
results = []
for rows, cols, dtype in shapes:
    sets = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
    compiled = torch.compile(reference.softmax, dynamic=False)
    variants = {"unmasked": variant(production_limits, 32768), "masked": variant(production_limits, 0)}
    if (rows, cols) == (32768, 128):
        for t in (512, 1024, 2048, 4096, 8192):
            for b in (16, 32, 64):
                variants[f"unmasked_t{t}_b{b}"] = variant(production_limits._replace(target_elems=t, thread_bytes=b, max_rows=64), 32768)
    want = variant(production_limits, 0)(sets[0])
    same = {name: bool(torch.equal(run(sets[0]), want)) for name, run in variants.items()}
    calls = {name: (lambda run: lambda i: run(sets[i]))(run) for name, run in variants.items()}
    calls["compile"] = lambda i: compiled(sets[i])
    calls["copy"] = lambda i: sets[i].clone()
    times = time_interleaved(calls, device, TimingPlan(warmup=10, repetitions=200, input_sets=3))
    row = {"shape": [rows, cols], "dtype": str(dtype), "bitwise_same_as_masked": same,
           "median_ms": {k: round(median(v), 5) for k, v in sorted(times.items(), key=lambda kv: median(kv[1]))}}
    print(json.dumps(row, indent=1))
    results.append(row)
    torch._dynamo.reset()
json.dump(results, open(sys.argv[1], "w"), indent=1)
