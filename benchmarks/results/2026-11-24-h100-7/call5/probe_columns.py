"""Call 4 timed LayerNorm's column-block backward 28% slower than call 2 at the same tiles (RMSNorm
unchanged). Same machine and run: call 2's kernels (norm_call2.py, a copy of that commit's
kernels/_norm.py) against this commit's, the row-sums kernel at the column kernel's tile, at its
own default and at call 4's best tiles, interleaved, at 1024 x 16384 bf16. Writes medians (ms) as JSON to argv[1]."""

import importlib.util
import json
import os
import sys

import torch

import kernels._norm as new
from harness.bench.timing import TimingPlan, median, time_interleaved

spec = importlib.util.spec_from_file_location("norm_call2", os.path.join(os.path.dirname(__file__), "norm_call2.py"))
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

dev = torch.device("cuda")
same_tile = new._GPU_BWD_COLUMNS
default_sums = new._GPU_BWD_ROW_SUMS
out = {}
for rms in (False, True):
    gen = torch.Generator(device=dev).manual_seed(0)
    sets = []
    for _ in range(3):
        x, dy = (torch.randn(1024, 16384, device=dev, generator=gen).bfloat16() for _ in range(2))
        w, b = (torch.randn(16384, device=dev, generator=gen).bfloat16() for _ in range(2))
        stats = new.forward(x, w, None if rms else b, eps=1e-5, rms=rms).stats
        sets.append((x, dy, w, stats))

    def call(mod, sums_limits=None):
        def run(i):
            if sums_limits is not None:
                new._GPU_BWD_ROW_SUMS = sums_limits
            x, dy, w, stats = sets[i]
            return mod.backward(x, dy, w, stats, rms=rms, need_dweight=True, need_dbias=not rms)
        return run

    calls = {"call2": call(old), "now_sums_at_column_tile": call(new, same_tile), "now_sums_default": call(new, default_sums),
             "now_sums_8192_2048_64": call(new, default_sums._replace(split_block=8192, target_elems=2048, thread_bytes=64)),
             "now_sums_2048_2048_32": call(new, default_sums._replace(split_block=2048, target_elems=2048, thread_bytes=32)),
             "now_sums_4096_2048_16": call(new, default_sums._replace(split_block=4096, target_elems=2048, thread_bytes=16))}
    times = time_interleaved(calls, dev, TimingPlan(repetitions=60))
    out["rms" if rms else "layer_norm"] = {k: median(v) for k, v in times.items()}
    ref = calls["call2"](0)
    for name in list(calls)[1:]:
        got = calls[name](0)
        out[f"{'rms' if rms else 'layer_norm'} {name} equal to call2"] = [torch.equal(a, b) for a, b in zip(ref, got) if a is not None]
    new._GPU_BWD_ROW_SUMS = default_sums
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[1], "w"), indent=1)
