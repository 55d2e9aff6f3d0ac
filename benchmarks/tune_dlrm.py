"""Sweep dlrm_interaction's tiling on the GPU: samples per program (BLOCK_B) and warps, forward or
backward, at the benchmark shapes, timed interleaved with the production tiling, eager,
torch.compile and a device copy of the sparse input (what the memory system gives for that many
bytes).

    python benchmarks/tune_dlrm.py OUT.json [float16 | float32] [forward | backward]

(default float16 forward). Written for issue 6's 80%-of-copy-bandwidth target: the 16-bit forward's
production tiling reached 76% at 65536 x 26 x 128 fp16, and fp32's partial sums
(``WIDE_SUM``) had never been tiled; the fp32 forward's split products were swept with it too
(one warp a sample, results/2026-11-24-h100-6). The backward's peers are eager's and compile's
backward alone (autograd through the reference, from one forward per input set). Prints each
shape's best tiling; the choice goes into the kernel by hand.
"""

from __future__ import annotations

import itertools
import json
import sys

import torch
import triton

import kernels.dlrm_interaction as dlrm
from harness.bench.timing import TimingPlan, median, time_interleaved
from references.dlrm_interaction import dlrm_interaction as reference

SHAPES = {torch.float16: ((65536, 26, 128), (65536, 26, 64), (65536, 26, 16), (8192, 26, 128)),
          torch.float32: ((65536, 26, 64), (65536, 26, 16), (65536, 26, 128))}
BLOCK_B = (1, 2, 4, 8)
WARPS = (1, 2, 4, 8)
KERNELS = ("forward", "backward")


def _launch(kernel: str, dense, sparse, grad, block_b: int, warps: int):
    """The production ``kernel`` with BLOCK_B and num_warps overridden (BLOCK_T and BLOCK_D kept)."""
    _, block_t, block_d, _ = dlrm.gpu_launch(sparse.shape[1], dense.shape[1], dense.dtype, kernel)
    launch = (block_b, block_t, block_d, warps)
    if kernel == "forward":
        return dlrm._forward(dense, sparse, launch=launch)
    return dlrm._backward(dense, sparse, grad, launch=launch)


def _flat(result) -> torch.Tensor:
    """A forward's output, or a backward's gradients in one vector (for the check, not timed)."""
    return torch.cat([g.flatten() for g in result]) if isinstance(result, (tuple, list)) else result


def _peer_backward(fn, dense, sparse, grad):
    """Eager's or compile's backward alone, from one forward on leaves of these inputs (repeated
    with retain_graph, which a compiled backward allows only without donated buffers: torch 2.11
    raises otherwise, results/2026-11-24-h100-9/call2)."""
    leaves = (dense.detach().requires_grad_(True), sparse.detach().requires_grad_(True))
    with torch._functorch.config.patch(donated_buffer=False):
        out = fn(*leaves)
    return lambda: torch.autograd.grad(out, leaves, grad, retain_graph=True)


def tune_shape(kernel: str, batch: int, features: int, dim: int, dtype: torch.dtype, plan: TimingPlan) -> dict:
    device = torch.device("cuda", 0)
    t = features + 1
    inputs = [(torch.randn(batch, dim, device=device, dtype=dtype),
               torch.randn(batch, features, dim, device=device, dtype=dtype),
               torch.randn(batch, dim + t * (t - 1) // 2, device=device, dtype=dtype)) for _ in range(plan.input_sets)]
    copies = [torch.empty_like(s) for _, s, _ in inputs]
    compiled = torch.compile(reference, dynamic=False)
    if kernel == "forward":
        expected = reference(*inputs[0][:2])
        calls = {"production": lambda i: dlrm._forward(*inputs[i][:2]),
                 "eager": lambda i: reference(*inputs[i][:2]),
                 "compile": lambda i: compiled(*inputs[i][:2])}
        moved = (inputs[0][0].numel() + inputs[0][1].numel() + expected.numel()) * dtype.itemsize
    else:
        expected = _flat(_peer_backward(reference, *inputs[0])())
        eager = [_peer_backward(reference, *x) for x in inputs]
        comp = [_peer_backward(compiled, *x) for x in inputs]
        calls = {"production": lambda i: dlrm._backward(*inputs[i]),
                 "eager": lambda i: eager[i](), "compile": lambda i: comp[i]()}
        moved = (inputs[0][2].numel() + 2 * (inputs[0][0].numel() + inputs[0][1].numel())) * dtype.itemsize
    calls["copy_sparse"] = lambda i: copies[i].copy_(inputs[i][1])
    scale = expected.float().abs().max().item()
    wrong = []
    for block_b, warps in itertools.product(BLOCK_B, WARPS):
        name = f"b{block_b}_w{warps}"
        got = _flat(_launch(kernel, *inputs[0], block_b, warps))
        if not torch.allclose(got.float(), expected.float(), rtol=2e-2, atol=2e-2 * scale):  # a tiling bug, not numerics
            wrong.append(name)
            continue
        calls[name] = lambda i, b=block_b, w=warps: _launch(kernel, *inputs[i], b, w)
    medians = {k: median(v) for k, v in time_interleaved(calls, device, plan).items()}
    copy_gbs = 2 * inputs[0][1].numel() * dtype.itemsize / medians["copy_sparse"] / 1e6
    best = min((k for k in medians if k.startswith("b")), key=medians.get)
    print(f"{kernel} {batch}x{features}x{dim} {dtype}: production {medians['production']:.4f} ms "
          f"({moved / medians['production'] / 1e6 / copy_gbs:.1%} of the copy's {copy_gbs:.0f} GB/s), "
          f"best {best} {medians[best]:.4f} ({moved / medians[best] / 1e6 / copy_gbs:.1%}), "
          f"eager {medians['eager']:.4f}, compile {medians['compile']:.4f}; wrong: {wrong or 'none'}")
    for k, v in sorted(medians.items(), key=lambda kv: kv[1]):
        print(f"   {k:16s} {v:.4f} ms {moved / v / 1e6:7.0f} GB/s")
    return {"kernel": kernel, "shape": [batch, features, dim], "dtype": str(dtype), "bytes": moved,
            "copy_GBps": copy_gbs, "production_launch": list(dlrm.gpu_launch(features, dim, dtype, kernel)),
            "median_ms": medians, "wrong": wrong}


def main(path: str, dtype: torch.dtype, kernel: str) -> None:
    plan = TimingPlan(repetitions=30)
    results = []
    for shape in SHAPES[dtype]:
        results.append(tune_shape(kernel, *shape, dtype, plan))
        torch._dynamo.reset()
        with open(path, "w") as handle:  # after every shape: a run cut off keeps what it measured
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "triton": triton.__version__, "results": results}, handle, indent=1)


if __name__ == "__main__":
    args = sys.argv[1:]
    if not 1 <= len(args) <= 3 or (args[1:2] and args[1] not in ("float16", "float32")) \
            or (args[2:] and args[2] not in KERNELS):
        sys.exit(__doc__)
    main(args[0], getattr(torch, args[1]) if args[1:] else torch.float16, args[2] if args[2:] else "forward")
