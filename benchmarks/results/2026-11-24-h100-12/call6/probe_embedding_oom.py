"""Call 6 probe: where dlrm_embedding's 65536 x 26 x 16 fp32 benchmark (26 M table rows) runs the
H100 out of memory in its forward+backward pass (76 GB allocated, 3.1 GiB more wanted, in calls 4
and 5 and since 2026-11-23). Runs the runner's shape benchmark without its error handling; on the
error prints the traceback, the allocator's peak and the live CUDA tensors of 256 MB or more."""
import gc
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
import harness.bench.runner as runner  # noqa: E402
from harness.bench.timing import TimingPlan  # noqa: E402
from harness.registry import load_specs  # noqa: E402

spec = load_specs()["dlrm_embedding"]
shape = next(s for s in spec.perf.shapes if s.dims["rows"] == 26_000_000)
device = torch.device("cuda", 0)
try:
    records = runner._bench_shape(spec, shape, device, None, TimingPlan(warmup=2, repetitions=5), print)
    print("no error:", [(r["pass"], r["implementation"], round(r["median_ms"], 4)) for r in records])
except torch.OutOfMemoryError:
    traceback.print_exc()
    print("peak allocated GB", torch.cuda.max_memory_allocated() / 1e9, "now", torch.cuda.memory_allocated() / 1e9)
    big = {}
    for obj in gc.get_objects():
        try:
            if torch.is_tensor(obj) and obj.is_cuda and obj.untyped_storage().nbytes() >= 256 << 20:
                key = (tuple(obj.shape), str(obj.dtype), obj.requires_grad, obj.grad_fn.__class__.__name__ if obj.grad_fn else None)
                big[key] = big.get(key, 0) + 1
        except Exception:
            pass
    for key, n in sorted(big.items(), key=lambda kv: -kv[1]):
        print(n, "x", key)
