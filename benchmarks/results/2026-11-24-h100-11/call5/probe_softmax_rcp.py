"""Call 5 probe: softmax's forward before and after its fp32 row reciprocal became
``_rows.reciprocal_moderate`` (a refined rcp.approx.f64 seed) instead of IEEE division, whose
inlined code and slow-path branches were 3 of 28 instructions an element at 32K-element rows and
16 of 51 at 128-element rows (sm_90 SASS). ``softmax_before.py`` is kernels/softmax.py before the
change, imported beside the package (its _rows is the package's). Interleaved in one process with
torch.compile of the reference (dynamic=False) and a same-size copy, 300 repetitions, at the peer
shapes; outputs compared (max |difference| in ulps of the output). Writes JSON to argv[1].
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
import references.softmax as reference  # noqa: E402

spec = importlib.util.spec_from_file_location("softmax_before", os.path.join(HERE, "softmax_before.py"))
before = importlib.util.module_from_spec(spec)
spec.loader.exec_module(before)

device = torch.device("cuda", 0)
shapes = ((32768, 128, torch.float32), (4096, 32768, torch.float32), (8192, 1024, torch.float16),
          (4096, 8192, torch.bfloat16), (16384, 4096, torch.float16), (8192, 1024, torch.float32))
results = []
for rows, cols, dtype in shapes:
    sets = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(3)]
    compiled = torch.compile(reference.softmax, dynamic=False)
    old, new = before._forward(sets[0]), after._forward(sets[0])
    ulps = ((old.double() - new.double()).abs() / torch.finfo(dtype).eps / old.double().abs().clamp_min(1e-30)).max()
    times = time_interleaved({"before": lambda i: before._forward(sets[i]), "after": lambda i: after._forward(sets[i]),
                              "compile": lambda i: compiled(sets[i]), "copy": lambda i: sets[i].clone()},
                             device, TimingPlan(warmup=10, repetitions=300, input_sets=3))
    med = {k: round(median(v), 5) for k, v in times.items()}
    row = {"shape": [rows, cols], "dtype": str(dtype), "bitwise_same": bool(torch.equal(old, new)),
           "max_relative_difference_in_eps": float(ulps), "median_ms": med,
           "after_over_before": round(med["after"] / med["before"], 4), "compile_over_after": round(med["compile"] / med["after"], 4)}
    print(json.dumps(row))
    results.append(row)
    torch._dynamo.reset()
json.dump(results, open(sys.argv[1], "w"), indent=1)
