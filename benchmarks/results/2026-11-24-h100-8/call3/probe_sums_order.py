"""Call 3 probe: the norms' row-sums kernel (rows wider than one block) with its programs in
column-block order, against the production order (row tiles first), in one process.

    python probe_sums_order.py OUT.json

Call 2 found the elementwise forwards 6% slower than a copy while their programs ran row tiles
first: the programs resident at once all read one column block of rows a row stride apart. The
row-sums kernel of the norms' column backward is launched that way too ((row tiles, column
blocks)). The variant is a copy of the kernels package (``kernels_sums_cols``) whose row-sums
kernel takes its column block from the grid's first dimension. Times forward+backward of
LayerNorm, RMSNorm and dropout-add-LayerNorm at 1024 x 16384 and 2048 x 16384 bf16, both
versions interleaved with eager and torch.compile.
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
import triton

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)

from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402

_SWAPS = (
    ("rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)\n    block = tl.program_id(1)",
     "rows = tl.program_id(1) * ROWS + tl.arange(0, ROWS)\n    block = tl.program_id(0)"),
    ("tl.store(out + tl.num_programs(1) * n_rows, tl.sum(g, axis=1), mask=row_ok)",
     "tl.store(out + tl.num_programs(0) * n_rows, tl.sum(g, axis=1), mask=row_ok)"),
    ("_norm_bwd_row_sums_kernel[(row_tiles, tile.col_blocks)](",
     "_norm_bwd_row_sums_kernel[(tile.col_blocks, row_tiles)]("),
)


def variant(where: str):
    pkg = "kernels_sums_cols"
    dst = os.path.join(where, pkg)
    shutil.copytree(os.path.join(ROOT, "kernels"), dst, ignore=shutil.ignore_patterns("__pycache__"))
    for fn in os.listdir(dst):
        if fn.endswith(".py"):
            path = os.path.join(dst, fn)
            src = re.sub(r"(?m)^(\s*)from kernels([ .])", rf"\1from {pkg}\2", open(path).read())
            if fn == "_norm.py":
                for old, new in _SWAPS:
                    assert src.count(old) == 1, old
                    src = src.replace(old, new)
            open(path, "w").write(src)
    sys.path.insert(0, where)
    return {m: importlib.import_module(f"{pkg}.{m}") for m in ("layer_norm", "rms_norm", "dropout_add_norm")}


def main(path: str) -> None:
    import kernels.dropout_add_norm
    import kernels.layer_norm
    import kernels.rms_norm
    prod = {"layer_norm": kernels.layer_norm, "rms_norm": kernels.rms_norm, "dropout_add_norm": kernels.dropout_add_norm}
    packages = {"prod": prod, "sums_cols": variant(tempfile.mkdtemp())}
    dev = torch.device("cuda")
    plan = TimingPlan(repetitions=50)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    for rows in (1024, 2048):
        n = 16384
        for op in ("layer_norm", "rms_norm", "dropout_add_norm"):
            torch.manual_seed(0)
            sets = []
            for _ in range(plan.input_sets):
                x = torch.randn(rows, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
                w = torch.randn(n, device=dev, dtype=torch.bfloat16, requires_grad=True)
                b = torch.randn(n, device=dev, dtype=torch.bfloat16, requires_grad=True)
                res = torch.randn(rows, n, device=dev, dtype=torch.bfloat16)
                sets.append((x, w, b, res, torch.randn(rows, n, device=dev, dtype=torch.bfloat16)))

            def kernel(m, x, w, b, res):
                if op == "layer_norm":
                    return m["layer_norm"].layer_norm(x, w, b)
                if op == "rms_norm":
                    return m["rms_norm"].rms_norm(x, w)
                return m["dropout_add_norm"].dropout_add_norm(x, res, bias=b, weight=w, p=0.1, seed=1234)

            def reference(x, w, b, res):
                if op == "layer_norm":
                    return F.layer_norm(x, (n,), w, b)
                if op == "rms_norm":
                    return F.rms_norm(x, (n,), w)
                return F.layer_norm(F.dropout(x + b, 0.1) + res, (n,), w)

            compiled = torch.compile(reference, dynamic=False)
            grads = {}
            for name, m in packages.items():
                x, w, b, res, dy = sets[0]
                x.grad = w.grad = b.grad = None
                kernel(m, x, w, b, res).backward(dy)
                grads[name] = [t.grad.clone() if t.grad is not None else None for t in (x, w, b)]
            same = all((g1 is None and g2 is None) or torch.equal(g1, g2) for g1, g2 in zip(grads["prod"], grads["sums_cols"]))

            def step(f, i):
                x, w, b, res, dy = sets[i]
                x.grad = w.grad = b.grad = None
                f(x, w, b, res).backward(dy)
            calls = {name: (lambda i, m=m: step(lambda *a: kernel(m, *a), i)) for name, m in packages.items()}
            calls["eager"] = lambda i: step(reference, i)
            calls["compile"] = lambda i: step(compiled, i)
            med = {k: median(v) for k, v in time_interleaved(calls, dev, plan).items()}
            label = f"{op} {rows}x{n} bf16 forward+backward"
            results[label] = {"median_ms": med, "bitwise_same_grads": same}
            print(label, " ".join(f"{k} {t:.4f}" for k, t in med.items()), "same grads:", same, flush=True)
            torch._dynamo.reset()
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
