"""Call 2 probe: what the L2 flush between repetitions charges a kernel.

The benchmark runner flushes L2 by zeroing a buffer twice its size, which leaves L2 full of dirty
lines; a kernel timed next pays for writing them back as its own loads and stores evict them. Call 1
hints at it: ncu (which writes back and invalidates L2 before a kernel) put softmax 32768 x 128 fp32
at 11.2 us, the interleaved event timing at 16.5, and every 33.5 MB shape has sat at 67% of the
1 GiB copy's bandwidth, which is 33.5 MB over 33.5 + 16.7 MB of write-backs.

Times copies of 4 MB to 1 GiB and the short- and long-row softmax and norm forwards (ours and
torch.compile's) under three flushes: "write" (the runner's zeroing), "read" (reading a buffer twice
L2's size that is never written, so the evicted lines are written back inside the flush and L2 is
left clean), "none". Same spin before each start event as the runner. Writes JSON to argv[1].
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import median  # noqa: E402
import kernels.layer_norm as layer_norm  # noqa: E402
import kernels.softmax as softmax  # noqa: E402
import references.layer_norm as ref_ln  # noqa: E402
import references.softmax as ref_sm  # noqa: E402

device = torch.device("cuda", 0)
torch.set_grad_enabled(False)
l2 = torch.cuda.get_device_properties(device).L2_cache_size
write_buf = torch.empty(2 * l2, dtype=torch.uint8, device=device)
read_buf = torch.zeros(2 * l2 // 4, dtype=torch.float32, device=device)
FLUSHES = {"write": lambda: write_buf.zero_(), "read": lambda: read_buf.sum(), "none": lambda: None}


def time_calls(calls, flush, reps=200, sets=3):
    names = list(calls)
    for i in range(5):
        for n in names:
            calls[n](i % sets)
    torch.cuda.synchronize()
    ev = {n: [] for n in names}
    for rep in range(reps):
        for n in names[rep % len(names):] + names[:rep % len(names)]:
            flush()
            torch.cuda._sleep(2_000_000)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); calls[n](rep % sets); e.record()
            ev[n].append((s, e))
    torch.cuda.synchronize()
    return {n: round(median([s.elapsed_time(e) for s, e in p]), 5) for n, p in ev.items()}


results = {"device": torch.cuda.get_device_name(device), "l2_bytes": l2, "copies": {}, "kernels": {}}
for mb in (4, 16.75, 64, 256, 1024):
    n = int(mb * (1 << 20)) // 4
    src = [torch.randn(n, device=device) for _ in range(3 if mb <= 256 else 1)]
    dst = torch.empty_like(src[0])
    row = {}
    for fname, flush in FLUSHES.items():
        ms = time_calls({"copy": lambda i: dst.copy_(src[i % len(src)])}, flush)["copy"]
        row[fname] = {"ms": ms, "gbps": round(2 * n * 4 / ms / 1e6, 1)}
    results["copies"][f"{mb} MiB in"] = row
    print("copy", mb, row, flush=True)
    del src, dst

cases = [
    ("softmax", (32768, 128), torch.float32, softmax.softmax, ref_sm.softmax, 0),
    ("softmax", (8192, 1024), torch.float16, softmax.softmax, ref_sm.softmax, 0),
    ("softmax", (4096, 8192), torch.bfloat16, softmax.softmax, ref_sm.softmax, 0),
    ("softmax", (4096, 32768), torch.float32, softmax.softmax, ref_sm.softmax, 0),
    ("layer_norm", (65536, 256), torch.bfloat16, layer_norm.layer_norm, ref_ln.layer_norm, 2),
    ("layer_norm", (8192, 4096), torch.bfloat16, layer_norm.layer_norm, ref_ln.layer_norm, 2),
]
for op, shape, dtype, ours, ref, n_vec in cases:
    compiled = torch.compile(ref, dynamic=False)
    sets = [(torch.randn(*shape, device=device, dtype=dtype),
             *[torch.randn(shape[-1], device=device, dtype=dtype) for _ in range(n_vec)]) for _ in range(3)]
    calls = {"ours": lambda i: ours(*sets[i]), "compile": lambda i: compiled(*sets[i]),
             "copy": lambda i: sets[i][0].clone()}
    nbytes = 2 * sets[0][0].numel() * sets[0][0].element_size()
    row = {"bytes": nbytes}
    for fname, flush in FLUSHES.items():
        row[fname] = time_calls(calls, flush)
    key = f"{op} {shape[0]}x{shape[1]} {str(dtype).replace('torch.', '')}"
    results["kernels"][key] = row
    print(key, row, flush=True)
json.dump(results, open(sys.argv[1], "w"), indent=1)
