"""Sweep the softmax kernel's GPU tiling (rows per program, warps) at the peer shapes.

Times each candidate ``TileLimits`` for the forward and the backward kernel, interleaved with
torch.compile of the reference and with a plain device copy of the same bytes (what the memory
system gives at that size: a small tensor cannot reach the large-copy bandwidth the roofline is
measured at). Writes every median as JSON; the chosen limits go into kernels/softmax.py by hand.

    python benchmarks/tune_softmax.py OUT.json
"""

import itertools
import json
import sys

import torch

import kernels.softmax as softmax
from harness.bench.timing import TimingPlan, median, time_interleaved
from kernels import _rows

SHAPES = ((8192, 1024, torch.float16), (4096, 8192, torch.bfloat16), (32768, 128, torch.float32),
          (4096, 32768, torch.float32), (16384, 4096, torch.float16))
TARGET_ELEMS = (128, 256, 512, 1024, 2048, 4096, 8192)
THREAD_BYTES = (16, 32, 64, 128)
MAX_BLOCKS = (16384, 32768)  # 32768: a 32K-element row held in registers instead of two passes
MAX_ROWS = (16, 64)  # short rows: more rows per program than the default cap


def main(path: str) -> None:
    device = torch.device("cuda", 0)
    plan = TimingPlan(repetitions=30)
    compiled = torch.compile(lambda x: torch.softmax(x, dim=-1), dynamic=False)
    base = softmax._GPU_LIMITS
    results = []
    for rows, cols, dtype in SHAPES:
        xs = [torch.randn(rows, cols, device=device, dtype=dtype) for _ in range(plan.input_sets)]
        ys = [torch.softmax(x.float(), -1).to(dtype) for x in xs]
        dys = [torch.randn_like(x) for x in xs]
        outs = [torch.empty_like(x) for x in xs]
        calls = {
            "copy_fwd": lambda i: outs[i].copy_(xs[i]),  # 2 passes of bytes, like softmax forward
            "compile_fwd": lambda i: compiled(xs[i]),
        }
        configs = {}
        for target, thread_bytes, max_block, max_rows in itertools.product(TARGET_ELEMS, THREAD_BYTES, MAX_BLOCKS, MAX_ROWS):
            limits = base._replace(target_elems=target, thread_bytes=thread_bytes, max_block=max_block, max_rows=max_rows)
            tile = _rows.row_tile(cols, dtype.itemsize, limits)
            label = f"t{target}_b{thread_bytes}_m{max_block}_r{max_rows}"
            if (tile.rows, tile.num_warps, tile.block, tile.col_blocks) in configs.values():
                continue  # same launch as a config already listed
            configs[label] = (tile.rows, tile.num_warps, tile.block, tile.col_blocks)

            def fwd(i, limits=limits):
                softmax._GPU_LIMITS = limits
                softmax._config.cache_clear()
                return softmax._forward(xs[i])

            def bwd(i, limits=limits):
                softmax._GPU_LIMITS = limits
                softmax._config.cache_clear()
                return softmax._backward(ys[i], dys[i])

            calls[f"fwd_{label}"] = fwd
            calls[f"bwd_{label}"] = bwd
        samples = time_interleaved(calls, device, plan)
        softmax._GPU_LIMITS = base
        softmax._config.cache_clear()
        entry = {"shape": [rows, cols], "dtype": str(dtype), "configs": configs,
                 "median_ms": {k: median(v) for k, v in samples.items()},
                 "bytes_fwd": 2 * rows * cols * dtype.itemsize}
        results.append(entry)
        best = min((k for k in entry["median_ms"] if k.startswith("fwd_")), key=entry["median_ms"].get)
        bw = entry["bytes_fwd"] / entry["median_ms"][best] / 1e6
        print(f"{rows}x{cols} {dtype}: copy {entry['median_ms']['copy_fwd']:.4f} compile "
              f"{entry['median_ms']['compile_fwd']:.4f} best fwd {best} {entry['median_ms'][best]:.4f} ms ({bw:.0f} GB/s)")
        for k, v in sorted(entry["median_ms"].items()):
            print(f"   {k:24s} {v:.4f}")
    with open(path, "w") as handle:
        json.dump({"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "results": results}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
