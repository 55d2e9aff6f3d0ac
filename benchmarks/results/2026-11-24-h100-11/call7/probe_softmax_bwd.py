"""Call 7 probe: softmax's backward before and after its fp32 row reciprocal (c / sum(y)) became
``_rows.reciprocal_moderate`` instead of IEEE fp64 division (sm_90 SASS, an element: 128-wide
rows 40 -> 25 instructions, 16K-element blocks 26.5 -> 18.5). ``softmax_before.py`` is
kernels/softmax.py before the change, imported beside the package. The backward kernels alone,
interleaved in one process with torch.compile of the reference's forward+backward and a same-size
copy, 300 repetitions; outputs compared. Writes JSON to argv[1].
"""
import importlib.util
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels.softmax as after  # noqa: E402

spec = importlib.util.spec_from_file_location("softmax_before", os.path.join(HERE, "softmax_before.py"))
before = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before)

device = torch.device("cuda", 0)
results = []
for rows, cols, dtype in ((32768, 128, torch.float32), (4096, 32768, torch.float32), (8192, 1024, torch.float32),
                          (8192, 1024, torch.float16)):
    xs = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
    ys = [after._forward(x) for x in xs]
    dys = [torch.randn_like(x) for x in xs]
    old, new = before._backward(ys[0], dys[0]), after._backward(ys[0], dys[0])
    diff = (old.double() - new.double()).abs().max().item()
    times = time_interleaved({"before": lambda i: before._backward(ys[i], dys[i]),
                              "after": lambda i: after._backward(ys[i], dys[i]),
                              "clone_y_and_dy": lambda i: (ys[i].clone(), dys[i].clone())},
                             device, TimingPlan(warmup=10, repetitions=300, input_sets=3))
    med = {k: round(median(v), 5) for k, v in times.items()}
    row = {"shape": [rows, cols], "dtype": str(dtype), "bitwise_same": bool(torch.equal(old, new)), "max_abs_difference": diff,
           "median_ms": med, "after_over_before": round(med["after"] / med["before"], 4)}
    print(json.dumps(row))
    results.append(row)
json.dump(results, open(sys.argv[1], "w"), indent=1)
