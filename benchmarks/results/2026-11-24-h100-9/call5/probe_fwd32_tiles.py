"""Call 5 probe: dlrm_interaction's fp32 forward with wider column tiles, in package copies timed
side by side in one process: PARTIAL_TERMS (the columns of one head, summed by the tensor cores
from zero) at 16 (production), 32 and 64, at 1 and 2 warps. Call 1's numbers put the forward's
time mostly in the per-tile work (0.1125 ms at one 16-column tile, 0.3265 at four), not in the
bytes. Each variant's worst error in eps of the terms' sum is measured beside eager's (the heads
of 32 or 64 terms add roundings of the tensor cores' fp32 sums). Writes JSON to argv[1].
"""
import importlib
import json
import os
import re
import shutil
import sys
import tempfile

import torch
import triton

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)

from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
from references.dlrm_interaction import dlrm_interaction as reference, term_magnitudes  # noqa: E402


def variant(terms: int, where: str):
    """The dlrm_interaction module of a copy of the kernels package with PARTIAL_TERMS = terms."""
    pkg = f"kernels_t{terms}"
    dst = os.path.join(where, pkg)
    shutil.copytree(os.path.join(ROOT, "kernels"), dst, ignore=shutil.ignore_patterns("__pycache__"))
    for name in os.listdir(dst):
        if name.endswith(".py"):
            path = os.path.join(dst, name)
            src = open(path).read()
            src = re.sub(r"(?m)^(\s*)from kernels([ .])", rf"\1from {pkg}\2", src)
            src = re.sub(r"(?m)^(\s*)import kernels\.", rf"\1import {pkg}.", src)
            src = src.replace("PARTIAL_TERMS = tl.constexpr(16)", f"PARTIAL_TERMS = tl.constexpr({terms})")
            open(path, "w").write(src)
    if where not in sys.path:
        sys.path.insert(0, where)
    return importlib.import_module(f"{pkg}.dlrm_interaction")


device = torch.device("cuda", 0)
eps = torch.finfo(torch.float32).eps
tmp = tempfile.mkdtemp()
modules = {t: variant(t, tmp) for t in (16, 32, 64)}
results = []
for batch, features, dim in ((65536, 26, 64), (65536, 26, 128)):
    sets = [(torch.randn(batch, dim, device=device), torch.randn(batch, features, dim, device=device)) for _ in range(3)]
    exact = reference(sets[0][0].double(), sets[0][1].double())
    floor = eps * term_magnitudes(sets[0][0].double(), sets[0][1].double())
    calls, errors = {}, {}
    for terms, module in modules.items():
        _, block_t, _, _ = module.gpu_launch(features, dim, torch.float32, "forward")
        for warps in (1, 2):
            launch = (1, block_t, min(terms, triton.next_power_of_2(dim)), warps)
            name = f"t{terms}_w{warps}"
            try:
                out = module._forward(*sets[0], launch=launch)
            except Exception as error:  # a tile that does not compile or fit: reported, not timed
                errors[name] = f"{type(error).__name__}: {str(error)[:200]}"
                continue
            errors[name] = ((out.double() - exact).abs() / floor).max().item()
            calls[name] = lambda i, m=module, la=launch: m._forward(*sets[i], launch=la)
    errors["eager"] = ((reference(*sets[0]).double() - exact).abs() / floor).max().item()
    copies = [torch.empty_like(s) for _, s in sets]
    calls["eager"] = lambda i: reference(*sets[i])
    calls["copy_sparse"] = lambda i: copies[i].copy_(sets[i][1])
    medians = {k: median(v) for k, v in time_interleaved(calls, device, TimingPlan(repetitions=30)).items()}
    row = {"shape": [batch, features, dim], "median_ms": medians, "max_error_eps_terms": errors}
    print(batch, features, dim, flush=True)
    for k, v in sorted(medians.items(), key=lambda kv: kv[1]):
        print(f"   {k:12s} {v:.4f} ms  error {errors.get(k, '')}", flush=True)
    results.append(row)
with open(sys.argv[1], "w") as handle:
    json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "results": results}, handle, indent=1)
