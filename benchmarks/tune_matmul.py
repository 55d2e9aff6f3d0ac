"""Sweep linear_act's forward tile configurations on the GPU at its benchmark shapes, with and
without the saved z (the forward of a training step stores z for the backward; inference does not),
timed interleaved with the production configuration and torch.compile of the reference forward
(cuBLAS with the bias, then Inductor's fused activation: issue 5's bar). Candidates load their
tiles with pointers (the production kernel) or through TMA descriptors.

    python benchmarks/tune_matmul.py OUT.json [--mid]

``--mid`` sweeps products of a transformer block at a few thousand tokens instead (MID_SHAPES),
where the large tiles leave SMs idle: 2048 x 1024 outputs in 128 x 256 tiles are 64 tiles on an
H100's 132 SMs.

Written when the H100 profile (results/2026-11-24-h100-4/call1) showed the forward kernel 6.7x
slower when it also stores z: ptxas spills the 128 x 256 tile's epilogue (1376 bytes for exact
gelu). Prints each shape's best candidate; the choice goes into the kernel's tables by hand.
"""

from __future__ import annotations

import json
import sys

import torch

import kernels.linear_act as la
from harness.bench.timing import TimingPlan, median, time_interleaved
from references.linear_act import linear_act as reference

SHAPES = ((8192, 4096, 4096, torch.bfloat16, "gelu_tanh"), (8192, 11008, 4096, torch.bfloat16, "silu"),
          (8192, 16384, 4096, torch.bfloat16, "gelu"), (4096, 4096, 4096, torch.float16, "relu"),
          (16384, 3072, 768, torch.float16, "gelu"))
MID_SHAPES = ((2048, 1024, 1024, torch.bfloat16, "gelu"), (2048, 4096, 1024, torch.bfloat16, "gelu"),
              (4096, 1024, 4096, torch.bfloat16, "gelu"), (1024, 4096, 4096, torch.float16, "silu"),
              (4096, 2048, 2048, torch.bfloat16, "gelu"))
_C = la.MatmulConfig
# name -> (config, loaded through TMA descriptors?)
CANDIDATES = {
    "ptr_128x128x64_w8_s4": (_C(128, 128, 64, 8, 8, 4), False),
    "tma_256x128x64_w8_s3_split": (_C(256, 128, 64, 8, 8, 3, split_n=True), True),
    "tma_256x128x64_w8_s3_split_g16": (_C(256, 128, 64, 16, 8, 3, split_n=True), True),
    "tma_256x128x64_w8_s4_split": (_C(256, 128, 64, 8, 8, 4, split_n=True), True),
    "tma_256x128x64_w8_s3_split_persistent": (_C(256, 128, 64, 8, 8, 3, split_n=True, persistent=True), True),
    "tma_128x256x64_w8_s3_split_persistent": (_C(128, 256, 64, 8, 8, 3, split_n=True, persistent=True), True),
    "tma_256x128x64_w8_s2_split_persistent": (_C(256, 128, 64, 8, 8, 2, split_n=True, persistent=True), True),
    "tma_128x128x64_w8_s4_persistent": (_C(128, 128, 64, 8, 8, 4, persistent=True), True),
    "tma_128x128x64_w8_s4": (_C(128, 128, 64, 8, 8, 4), True),
    "tma_128x128x64_w4_s4": (_C(128, 128, 64, 8, 4, 4), True),
    "tma_128x128x64_w8_s3_split": (_C(128, 128, 64, 8, 8, 3, split_n=True), True),
    "tma_64x128x64_w4_s4": (_C(64, 128, 64, 8, 4, 4), True),
}


def _run(x, w, b, activation, save, candidate):
    config, tma = candidate
    return la._forward(x, w, b, activation, save, config, tma)


def tune_shape(m, n, k, dtype, activation, plan: TimingPlan) -> dict:
    device = torch.device("cuda", 0)
    inputs = [(torch.randn(m, k, device=device, dtype=dtype), torch.randn(n, k, device=device, dtype=dtype) / k ** 0.5,
               torch.randn(n, device=device, dtype=dtype)) for _ in range(plan.input_sets)]
    expected = reference(*inputs[0], activation).float()
    compiled = torch.compile(reference, dynamic=False)
    result = {}
    for save in (False, True):
        calls = {"production": lambda i, s=save: la._forward(*inputs[i], activation, s),
                 "compile": lambda i: compiled(*inputs[i], activation)}
        wrong = []
        for name, candidate in CANDIDATES.items():
            try:
                got = _run(*inputs[0], activation, save, candidate)[0].float()
            except Exception as exc:  # a candidate that does not compile on this Triton is a result
                print(f"   {name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", flush=True)
                wrong.append(name)
                continue
            if not torch.allclose(got, expected, rtol=2e-2, atol=2e-2):  # a tiling bug, not numerics
                wrong.append(name)
                continue
            calls[name] = lambda i, c=candidate, s=save: _run(*inputs[i], activation, s, c)
        medians = {key: median(v) for key, v in time_interleaved(calls, device, plan).items()}
        best = min((key for key in medians if key in CANDIDATES), key=medians.get, default=None)
        if best is None:
            print(f"{m}x{n}x{k} {dtype} {activation} save_z={save}: no candidate ran correctly ({wrong})", flush=True)
            result[f"save_z={save}"] = {"medians_ms": medians, "best": None, "wrong": wrong}
            continue
        tflops = 2 * m * n * k / 1e9
        print(f"{m}x{n}x{k} {dtype} {activation} save_z={save}: production {medians['production']:.4f} ms, "
              f"compile {medians['compile']:.4f}, best {best} {medians[best]:.4f} "
              f"({tflops / medians[best]:.0f} TFLOP/s); wrong: {wrong or 'none'}", flush=True)
        print("   " + ", ".join(f"{key} {v:.4f}" for key, v in sorted(medians.items(), key=lambda kv: kv[1])), flush=True)
        result[f"save_z={save}"] = {"medians_ms": medians, "best": best, "wrong": wrong}
    return result


def main(out: str, *flags: str) -> int:
    plan = TimingPlan(warmup=3, repetitions=15, input_sets=2)
    results = {}
    for m, n, k, dtype, activation in MID_SHAPES if "--mid" in flags else SHAPES:
        results[f"{m}x{n}x{k} {str(dtype).removeprefix('torch.')} {activation}"] = tune_shape(m, n, k, dtype, activation, plan)
        with open(out, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
