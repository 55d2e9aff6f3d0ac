"""Call 10 probe: is the norms' 1-4% short-row gap to torch.compile in the kernels or around them?
ncu (call 1) timed our LayerNorm forward at 65536 x 256 bf16 faster than compile's (20.6 against
21.4 us), the events 3% slower. Times each forward as the runner does (direct launch) and replayed
from a CUDA graph (one kernel, no launcher on the host and less launch work on the device), both
with the runner's reading flush and spin, interleaved. Writes JSON to argv[1]."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels.layer_norm as layer_norm  # noqa: E402
import kernels.rms_norm as rms_norm  # noqa: E402
import references.layer_norm as ref_ln  # noqa: E402
import references.rms_norm as ref_rms  # noqa: E402

device = torch.device("cuda", 0)
torch.set_grad_enabled(False)
results = []
for name, ours, ref, shape, n_vec in (
    ("layer_norm", layer_norm.layer_norm, ref_ln.layer_norm, (65536, 256), 2),
    ("rms_norm", rms_norm.rms_norm, ref_rms.rms_norm, (65536, 256), 1),
    ("layer_norm", layer_norm.layer_norm, ref_ln.layer_norm, (16384, 1024), 2),
):
    compiled = torch.compile(ref, dynamic=False)
    sets = [(torch.randn(*shape, device=device, dtype=torch.bfloat16),
             *[torch.randn(shape[-1], device=device, dtype=torch.bfloat16) for _ in range(n_vec)]) for _ in range(3)]
    for f in (ours, compiled):
        for s in sets:
            f(*s)
    torch.cuda.synchronize()
    graphs = {}
    for label, f in (("ours", ours), ("compile", compiled)):
        for i, s in enumerate(sets):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                f(*s)
            graphs[(label, i)] = g
    calls = {"ours": lambda i: ours(*sets[i]), "compile": lambda i: compiled(*sets[i]),
             "ours_graph": lambda i: graphs[("ours", i)].replay(),
             "compile_graph": lambda i: graphs[("compile", i)].replay(),
             "copy": lambda i: sets[i][0].clone()}
    times = time_interleaved(calls, device, TimingPlan(warmup=10, repetitions=300, input_sets=3))
    row = {"op": name, "shape": list(shape), "median_ms": {k: round(median(v), 5) for k, v in times.items()}}
    print(json.dumps(row), flush=True)
    results.append(row)
json.dump(results, open(sys.argv[1], "w"), indent=1)
