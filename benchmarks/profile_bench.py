"""Where a benchmark shape's GPU time goes: each implementation's kernels under torch.profiler.

    python benchmarks/profile_bench.py OUT.txt SPEC PASS [SHAPE_INDEX ...]

For each of SPEC's benchmark shapes (all, or those at the given indices of its sweep) and each
implementation the benchmark times (the kernel, eager, torch.compile), runs PASS (``forward`` or
``forward_backward``) on the benchmark's own inputs, twice to warm up and then five times under
the profiler, and writes the CUDA kernels by total time to OUT.txt. Written when linear_act's
forward+backward measured 3.7x slower than torch.compile's while its design says both run the same
two cuBLAS matmuls: the ratio says that a pass is slow, the kernel list says which launch is.
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from harness.bench.runner import bench_callables, bench_case, timed_calls
from harness.device import configure_backend, select_device
from harness.registry import load_specs
from harness.values import drawn_on

_REPEATS = 5


def profile_shape(spec, shape, device, pass_: str) -> str:
    """The kernel table of every implementation at one shape, as text."""
    fns, _ = bench_callables(spec, device)
    with drawn_on(device):
        calls = timed_calls(spec, fns, [bench_case(spec, shape, 0)], device, pass_)
    parts = []
    for name, call in calls.items():
        for _ in range(2):
            call(0)
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(_REPEATS):
                call(0)
            torch.cuda.synchronize(device)
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=90)
        parts.append(f"--- {name} ({_REPEATS} calls) ---\n{table}")
    return "\n".join(parts)


def main(out: str, spec_name: str, pass_: str, *indices: str) -> int:
    configure_backend()
    device = select_device()
    if device.type != "cuda":
        raise SystemExit("profile_bench.py profiles CUDA kernels: it needs a GPU")
    spec = load_specs()[spec_name]
    shapes = list(spec.perf.shapes)
    chosen = [shapes[int(i)] for i in indices] if indices else shapes
    with open(out, "w") as handle:
        for shape in chosen:
            handle.write(f"=== {spec_name} {pass_} {dict(shape.dims)} {shape.dtype} {dict(shape.scalars)}\n")
            handle.write(profile_shape(spec, shape, device, pass_) + "\n")
            handle.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
