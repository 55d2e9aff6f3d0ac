"""Call 1 probe: do cache hints move the streaming forwards, and what does torch.compile emit?

    python probe_hints.py hints OUTDIR       time each op's forward with the kernels as they are and
                                             with cache hints patched in, interleaved with eager,
                                             torch.compile and a same-size copy (OUTDIR/hints.json),
                                             and write torch.compile's generated code for each op
    python probe_hints.py ncu                the ops once each (ours, then compile's) between
                                             cudaProfilerStart/Stop, for ncu --profile-from-start off

The hinted variants are copies of the kernels package (``kernels_<variant>``) with every full-tile
load given ``eviction_policy="evict_first"`` and/or every masked tile store ``cache_modifier=".cs"``
(streaming: the data is touched once). The copy with no hint ("base") is timed too, so that a
difference is the hint's and not the copy's.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sys
import tempfile

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)

from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402

VARIANTS = {
    "base": (False, False),
    "load_first": (True, False),
    "store_cs": (False, True),
    "both": (True, True),
}
_LOAD = re.compile(r"(tl\.load\([^\n]*?mask=mask, other=[^)\n]*)\)")
_STORE = re.compile(r"(tl\.store\([^\n]*mask=mask)\)")


def variant_package(name: str, load_first: bool, store_cs: bool, where: str):
    pkg = f"kernels_{name}"
    dst = os.path.join(where, pkg)
    shutil.copytree(os.path.join(ROOT, "kernels"), dst, ignore=shutil.ignore_patterns("__pycache__"))
    for fn in os.listdir(dst):
        if not fn.endswith(".py"):
            continue
        path = os.path.join(dst, fn)
        src = open(path).read()
        src = re.sub(r"(?m)^(\s*)from kernels([ .])", rf"\1from {pkg}\2", src)
        src = re.sub(r"(?m)^(\s*)import kernels\.", rf"\1import {pkg}.", src)
        if load_first:
            src = _LOAD.sub(r'\1, eviction_policy="evict_first")', src)
        if store_cs:
            src = _STORE.sub(r'\1, cache_modifier=".cs")', src)
        open(path, "w").write(src)
    sys.path.insert(0, where)
    return {m: importlib.import_module(f"{pkg}.{m}") for m in ("bias_gelu", "glu", "add_mul_act", "softmax", "layer_norm", "rms_norm")}


def ops():
    """(label, make inputs, kernel call given a package's modules, reference, bytes moved)."""
    def vec(x):
        return torch.randn(x.shape[-1], device=x.device, dtype=x.dtype)
    out = []
    for approx in ("none", "tanh"):
        out.append((f"bias_gelu {approx} bf16 8192x16384", (8192, 16384, torch.bfloat16), lambda x: (x, vec(x)),
                    lambda m, approx=approx: (lambda x, b: m["bias_gelu"]._forward(x, b, approx)),
                    lambda x, b, approx=approx: F.gelu(x + b, approximate=approx), 2))
    out.append(("glu silu bf16 8192x16384", (8192, 16384, torch.bfloat16), lambda x: (x, torch.randn_like(x)),
                lambda m: (lambda a, b: m["glu"]._forward(a, b, "silu")), lambda a, b: F.silu(a) * b, 3))
    out.append(("add_mul_act relu bf16 8192x16384", (8192, 16384, torch.bfloat16),
                lambda x: (x, torch.randn_like(x), vec(x)),
                lambda m: (lambda x, y, b: m["add_mul_act"]._forward(x, y, b, 0.5, "relu")),
                lambda x, y, b: torch.relu(x + 0.5 * y + b), 3))
    for rows, cols in ((65536, 256), (16384, 1024), (8192, 4096)):
        out.append((f"layer_norm bf16 {rows}x{cols}", (rows, cols, torch.bfloat16), lambda x: (x, vec(x), vec(x)),
                    lambda m: (lambda x, w, b: m["layer_norm"].layer_norm(x, w, b)),
                    lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b), 2))
        out.append((f"rms_norm bf16 {rows}x{cols}", (rows, cols, torch.bfloat16), lambda x: (x, vec(x)),
                    lambda m: (lambda x, w: m["rms_norm"].rms_norm(x, w)),
                    lambda x, w: F.rms_norm(x, x.shape[-1:], w), 2))
    for rows, cols, dtype in ((32768, 128, torch.float32), (8192, 1024, torch.float16), (4096, 8192, torch.bfloat16)):
        out.append((f"softmax {dtype} {rows}x{cols}", (rows, cols, dtype), lambda x: (x,),
                    lambda m: (lambda x: m["softmax"]._forward(x)), lambda x: torch.softmax(x, -1), 2))
    return out


def hints(outdir: str) -> None:
    from torch._inductor.utils import run_and_get_code
    os.makedirs(outdir, exist_ok=True)
    where = tempfile.mkdtemp()
    packages = {name: variant_package(name, *flags, where) for name, flags in VARIANTS.items()}
    import kernels.layer_norm  # noqa: F401  (production, for the check below)
    dev = torch.device("cuda")
    plan = TimingPlan(repetitions=60)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton
    results["triton"] = triton.__version__
    for label, (rows, cols, dtype), make, kernel, reference, streams in ops():
        torch.manual_seed(0)
        sets = [make(torch.randn(rows, cols, device=dev, dtype=dtype)) for _ in range(plan.input_sets)]
        compiled = torch.compile(reference, dynamic=False)
        _, codes = run_and_get_code(compiled, *sets[0])
        with open(os.path.join(outdir, "inductor_" + re.sub(r"[^A-Za-z0-9]+", "_", label) + ".py"), "w") as f:
            f.write("\n\n# ----\n\n".join(codes))
        calls = {name: (lambda i, f=kernel(m): f(*sets[i])) for name, m in packages.items()}
        want = reference(*sets[0])
        for name in packages:
            got = calls[name](0)
            torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)  # a hint must not change results
            assert torch.equal(got, calls["base"](0)), f"{label}: {name} differs bitwise from base"
        calls["eager"] = lambda i: reference(*sets[i])
        calls["compile"] = lambda i: compiled(*sets[i])
        copies = [torch.empty_like(s[0]) for s in sets]
        calls["copy"] = lambda i: copies[i].copy_(sets[i][0])
        samples = time_interleaved(calls, dev, plan)
        med = {n: median(s) for n, s in samples.items()}
        nbytes = streams * rows * cols * torch.tensor([], dtype=dtype).element_size()
        row = {"median_ms": med, "gbps": {n: nbytes / (t * 1e-3) / 1e9 for n, t in med.items()},
               "vs_base": {n: med["base"] / med[n] for n in VARIANTS},
               "vs_compile": {n: med["compile"] / med[n] for n in VARIANTS}}
        results[label] = row
        print(label, " ".join(f"{n} {t:.4f}" for n, t in med.items()), "| vs base",
              " ".join(f"{n} {r:.3f}" for n, r in row["vs_base"].items()), flush=True)
        del compiled
        torch._dynamo.reset()
    with open(os.path.join(outdir, "hints.json"), "w") as f:
        json.dump(results, f, indent=1)


def ncu() -> None:
    import kernels.bias_gelu as bias_gelu
    import kernels.layer_norm as layer_norm
    import kernels.softmax as softmax
    mods = {"bias_gelu": bias_gelu, "layer_norm": layer_norm, "softmax": softmax}
    dev = torch.device("cuda")
    wanted = ("bias_gelu none bf16 8192x16384", "glu silu bf16 8192x16384", "layer_norm bf16 65536x256", "softmax torch.float32 32768x128")
    runs = []
    for label, (rows, cols, dtype), make, kernel, reference, _ in ops():
        if label not in wanted:
            continue
        args = make(torch.randn(rows, cols, device=dev, dtype=dtype))
        ours, compiled = kernel(mods), torch.compile(reference, dynamic=False)
        for _ in range(3):
            ours(*args), compiled(*args)
        runs.append((ours, compiled, args))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for ours, compiled, args in runs:
        ours(*args)
        compiled(*args)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    {"hints": lambda: hints(sys.argv[2]), "ncu": ncu}[sys.argv[1]]()
