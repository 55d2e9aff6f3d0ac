"""Call 3 probe: bias_gelu's exact fp32 forward (4096 x 16384) with its two fp32 -> fp64
conversions an element made cheaper, timed side by side with production in one process:
``b64`` converts the bias once on the host (a separate launch, timed inside the call) so the
kernel loads fp64; ``b64_pre`` the same with the conversion outside the timing (its bound);
``bits`` converts x and bias in the kernel from their bits on the integer lanes (a copy of the
kernels package whose _rows.widen does so; offline SASS: 48 fp64 slots an element against 54,
102 instructions against 70). Each variant's output is compared bitwise with production's.
Writes JSON to argv[1].
"""
import importlib
import json
import os
import re
import shutil
import sys
import tempfile

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)

from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels.bias_gelu as production  # noqa: E402
from kernels import _rows  # noqa: E402

BITS_WIDEN = '''def widen(v, PRECISE: tl.constexpr):
    """v in the compute dtype: fp64 with PRECISE, else fp32 (probe: fp32 from its bits)."""
    if PRECISE:
        if v.dtype == tl.float32:
            b = v.to(tl.int32, bitcast=True)
            mag = b & 0x7FFFFFFF
            sign = b & -0x80000000
            hi = (mag >> 3) + tl.where(mag >= 0x7F800000, 0x70000000, 0x38000000)
            hi = tl.where(mag == 0, 0, hi) | sign
            w = ((hi.to(tl.int64) << 32) | ((b << 29).to(tl.int64) & 0xFFFFFFFF)).to(tl.float64, bitcast=True)
            return tl.where((mag < 0x00800000) & (mag != 0), w * 2.0 - tl.where(b < 0, -2.0**-126, 2.0**-126), w)
        else:
            return v.to(tl.float64)
    else:
        return v.to(tl.float32)
'''


def bits_variant(where):
    pkg = "kernels_bits"
    dst = os.path.join(where, pkg)
    shutil.copytree(os.path.join(ROOT, "kernels"), dst, ignore=shutil.ignore_patterns("__pycache__"))
    for name in os.listdir(dst):
        if name.endswith(".py"):
            path = os.path.join(dst, name)
            src = open(path).read()
            src = re.sub(r"(?m)^(\s*)from kernels([ .])", rf"\1from {pkg}\2", src)
            src = re.sub(r"(?m)^(\s*)import kernels\.", rf"\1import {pkg}.", src)
            if name == "_rows.py":
                start = src.index("def widen(v, PRECISE: tl.constexpr):")
                end = src.index("@triton.jit", start)
                src = src[:start] + BITS_WIDEN + "\n\n" + src[end:]
            open(path, "w").write(src)
    sys.path.insert(0, where)
    return importlib.import_module(f"{pkg}.bias_gelu")


def launch_b64(module, x, b64):
    out = torch.empty_like(x)
    xl = module._rows.row_layout(x)
    tile = module._rows.elementwise_tile(xl.n, x.dtype, compute_bound=True)
    module._bias_gelu_fwd_kernel[module._rows.tile_grid(xl.rows, tile)](
        xl.tensor, b64, out, xl.rows, xl.n, *xl.kernel_args(),
        BLOCK=tile.block, ROWS=tile.rows, ACT="gelu", PRECISE=True, num_warps=tile.num_warps)
    return out


device = torch.device("cuda", 0)
bits = bits_variant(tempfile.mkdtemp())
rows, cols = 4096, 16384
sets = [(torch.randn(rows, cols, device=device), torch.randn(cols, device=device)) for _ in range(3)]
sets64 = [b.to(torch.float64) for _, b in sets]
want = production._forward(*sets[0], "none")
checks = {
    "b64": torch.equal(launch_b64(production, sets[0][0], sets64[0]), want),
    "bits": torch.equal(bits._forward(*sets[0], "none"), want),
}
# specials through the bits conversion: zeros, subnormals, infinities, NaN, extremes
special = torch.tensor([0.0, -0.0, 1e-45, -1e-45, 1e-40, -3e-39, 1.17e-38, float("inf"), float("-inf"),
                        float("nan"), 3.4e38, -3.4e38, 1.0, -2.5], device=device)
xs = special.repeat(64, 1)
zero_bias = torch.zeros(special.numel(), device=device)
a, b = production._forward(xs, zero_bias, "none"), bits._forward(xs, zero_bias, "none")
checks["bits_specials"] = bool(torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.isnan(), b.isnan())
                               and torch.equal(torch.signbit(a), torch.signbit(b)))
calls = {
    "production": lambda i: production._forward(*sets[i], "none"),
    "b64": lambda i: launch_b64(production, sets[i][0], sets[i][1].to(torch.float64)),
    "b64_pre": lambda i: launch_b64(production, sets[i][0], sets64[i]),
    "bits": lambda i: bits._forward(*sets[i], "none"),
    "copy": lambda i: sets[i][0].clone(),
}
times = time_interleaved(calls, device, TimingPlan(warmup=10, repetitions=60, input_sets=3))
result = {"shape": [rows, cols], "checks": checks, "median_ms": {k: median(v) for k, v in times.items()}}
print(json.dumps(result, indent=1))
json.dump(result, open(sys.argv[1], "w"), indent=1)
