"""Call 2 probe: what keeps the elementwise forwards from the copy's bandwidth?

    python probe_flat.py OUT.json

torch.compile's SwiGLU (call 1) moved its three streams at 2.99 TB/s, ours at 2.85: compile's
kernel is one-dimensional (1024 elements a program, 4 warps, no mask when the size divides, int32
offsets). These variants take one difference at a time, with our activation code throughout:

- ``prod``:        the production kernel (2-D tile of ROWS x 1024, masked, int64 store offsets);
- ``tile_even``:   the production tile with no masks and int32 offsets (sizes that divide);
- ``flat_X_W``:    one-dimensional, X elements a program, W warps, no mask, int32 offsets.

bias-GELU keeps a 2-D tile for its bias (``tile_even`` only). Timed interleaved with eager,
torch.compile and a same-size copy.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)

from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
from kernels import _activations, _rows, bias_gelu, glu  # noqa: E402


@triton.jit
def _glu_flat(a_ptr, b_ptr, out_ptr, XBLOCK: tl.constexpr):
    offs = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    a = tl.load(a_ptr + offs).to(tl.float32)
    b = tl.load(b_ptr + offs).to(tl.float32)
    tl.store(out_ptr + offs, _rows.cast_for_store(_activations.activate(a, "silu", False) * b, out_ptr))


@triton.jit
def _glu_tile_even(a_ptr, b_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    offs = rows[:, None] * n_cols + cols[None, :]
    a = tl.load(a_ptr + offs).to(tl.float32)
    b = tl.load(b_ptr + offs).to(tl.float32)
    tl.store(out_ptr + offs, _rows.cast_for_store(_activations.activate(a, "silu", False) * b, out_ptr))


@triton.jit
def _gelu_tile_even(x_ptr, b_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    offs = rows[:, None] * n_cols + cols[None, :]
    z = tl.load(x_ptr + offs).to(tl.float32) + tl.load(b_ptr + cols).to(tl.float32)[None, :]
    tl.store(out_ptr + offs, _rows.cast_for_store(_activations.activate(z, ACT, False), out_ptr))


@triton.jit
def _gelu_flat_pow2(x_ptr, b_ptr, out_ptr, LOG2N: tl.constexpr, XBLOCK: tl.constexpr, ACT: tl.constexpr):
    # bias column = offset mod N for a power-of-two N (a mask, as compile's code does for 16384)
    offs = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    z = tl.load(x_ptr + offs).to(tl.float32) + tl.load(b_ptr + (offs & ((1 << LOG2N) - 1))).to(tl.float32)
    tl.store(out_ptr + offs, _rows.cast_for_store(_activations.activate(z, ACT, False), out_ptr))


FLAT = ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 4), (8192, 8))
TILE = ((4, 8), (2, 4), (1, 4), (8, 8))  # (rows, warps) at 1024 columns


def glu_calls(a, b):
    out = torch.empty_like(a)
    n_rows, n = a.shape
    calls = {"prod": lambda: glu._forward(a, b, "silu")}
    for x, w in FLAT:
        calls[f"flat_{x}_{w}"] = lambda x=x, w=w: _glu_flat[(a.numel() // x,)](a, b, out, XBLOCK=x, num_warps=w)
    for r, w in TILE:
        calls[f"tile_even_{r}_{w}"] = lambda r=r, w=w: _glu_tile_even[(n_rows // r, n // 1024)](
            a, b, out, n, BLOCK=1024, ROWS=r, num_warps=w)
    return calls, out


def gelu_calls(x, bias, approx):
    out = torch.empty_like(x)
    n_rows, n = x.shape
    act = {"none": "gelu", "tanh": "gelu_tanh"}[approx]
    calls = {"prod": lambda: bias_gelu._forward(x, bias, approx)}
    for r, w in TILE:
        calls[f"tile_even_{r}_{w}"] = lambda r=r, w=w: _gelu_tile_even[(n_rows // r, n // 1024)](
            x, bias, out, n, BLOCK=1024, ROWS=r, ACT=act, num_warps=w)
    for xb, w in FLAT:
        calls[f"flat_{xb}_{w}"] = lambda xb=xb, w=w: _gelu_flat_pow2[(x.numel() // xb,)](
            x, bias, out, LOG2N=n.bit_length() - 1, XBLOCK=xb, ACT=act, num_warps=w)
    return calls, out


def main(path: str) -> None:
    dev = torch.device("cuda")
    plan = TimingPlan(repetitions=50)
    rows, n, dtype = 8192, 16384, torch.bfloat16
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    cases = [("glu silu", 3, lambda x: (x, torch.randn_like(x)), lambda a, b: F.silu(a) * b, glu_calls)]
    for approx in ("none", "tanh"):
        cases.append((f"bias_gelu {approx}", 2, lambda x: (x, torch.randn(x.shape[-1], device=dev, dtype=dtype)),
                      lambda x, b, approx=approx: F.gelu(x + b, approximate=approx),
                      lambda x, b, approx=approx: gelu_calls(x, b, approx)))
    for label, streams, make, reference, make_calls in cases:
        torch.manual_seed(0)
        sets = [make(torch.randn(rows, n, device=dev, dtype=dtype)) for _ in range(plan.input_sets)]
        per_set = [make_calls(*s) for s in sets]
        want = per_set[0][0]["prod"]()
        for name, call in per_set[0][0].items():
            per_set[0][1].zero_()
            call()
            got = want if name == "prod" else per_set[0][1]
            if not torch.equal(got, want):
                print(f"{label}: {name} differs from the production kernel at {(got != want).sum().item()} elements")
        calls = {name: (lambda i, name=name: per_set[i][0][name]()) for name in per_set[0][0]}
        compiled = torch.compile(reference, dynamic=False)
        calls["eager"] = lambda i: reference(*sets[i])
        calls["compile"] = lambda i: compiled(*sets[i])
        copies = [torch.empty_like(s[0]) for s in sets]
        calls["copy"] = lambda i: copies[i].copy_(sets[i][0])
        med = {k: median(v) for k, v in time_interleaved(calls, dev, plan).items()}
        nbytes = streams * rows * n * 2
        results[label] = {"median_ms": med, "tbps": {k: nbytes / (t * 1e-3) / 1e12 for k, t in med.items()}}
        print(label, " ".join(f"{k} {t:.4f}" for k, t in sorted(med.items(), key=lambda kv: kv[1])), flush=True)
        torch._dynamo.reset()
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
