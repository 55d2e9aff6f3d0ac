"""Call 10 probe: bias_gelu's exact fp32 backward (0.3669 ms at 4096 x 16384, 73% of copy
bandwidth; 128 registers, 2 programs of 8 warps an SM) on other tiles. The forward of the same
fp64 work ran 11% faster with 2-warp programs of one row (calls 1-2); here the backward's limits
(`_rows.ELEMENTWISE_BACKWARD_GPU_LIMITS`, shared by every elementwise backward) take candidates of
1024-4096 elements a program and 16-128 bytes a thread, timed side by side with production, for
the exact and tanh forms in fp32, and outputs (grad_x and grad_bias's partial rows summed) are
compared with production's. Writes JSON to argv[1].
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
from kernels import _rows, bias_gelu  # noqa: E402

device = torch.device("cuda", 0)
production = _rows.ELEMENTWISE_BACKWARD_GPU_LIMITS
candidates = {f"t{t}_b{b}": production._replace(target_elems=t, thread_bytes=b)
              for t in (1024, 2048, 4096) for b in (16, 32, 64, 128)}


def backward_with(limits, x, b, g, approximate):
    _rows.ELEMENTWISE_BACKWARD_GPU_LIMITS = limits
    try:
        return bias_gelu._backward(x, b, approximate, g)
    finally:
        _rows.ELEMENTWISE_BACKWARD_GPU_LIMITS = production


results = []
rows, cols = 4096, 16384
for approximate in ("none", "tanh"):
    sets = [(torch.randn(rows, cols, device=device), torch.randn(cols, device=device), torch.randn(rows, cols, device=device))
            for _ in range(3)]
    want_x, want_p = bias_gelu._backward(sets[0][0], sets[0][1], approximate, sets[0][2])
    calls, launches, same = {"production": lambda i: bias_gelu._backward(sets[i][0], sets[i][1], approximate, sets[i][2])}, {}, {}
    for name, limits in candidates.items():
        tile = _rows.row_tile(cols, 4, limits)
        key = (tile.block, tile.rows, tile.num_warps)
        if key in launches.values():
            continue
        launches[name] = key
        gx, partials = backward_with(limits, *sets[0][:2], sets[0][2], approximate)
        same[name] = {"grad_x": bool(torch.equal(gx, want_x)),
                      "grad_bias_rel": float(((partials.sum(0) - want_p.sum(0)).abs().max() / want_p.sum(0).abs().max()).item())}
        calls[name] = (lambda limits: lambda i: backward_with(limits, sets[i][0], sets[i][1], sets[i][2], approximate))(limits)
    calls["copy"] = lambda i: sets[i][0].clone()
    times = time_interleaved(calls, device, TimingPlan(warmup=5, repetitions=60, input_sets=3))
    row = {"approximate": approximate, "shape": [rows, cols], "launch (block, rows, warps)": {k: list(v) for k, v in launches.items()},
           "outputs": same, "median_ms": {k: round(median(v), 5) for k, v in sorted(times.items(), key=lambda kv: median(kv[1]))}}
    print(json.dumps(row["median_ms"]))
    results.append(row)
json.dump(results, open(sys.argv[1], "w"), indent=1)
