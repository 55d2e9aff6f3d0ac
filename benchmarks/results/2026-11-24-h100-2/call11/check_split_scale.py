"""CPU check of the call-11 failure (dropout_add_norm fp32 forward, prenorm sum 8 ulp off): the
prenorm sum s = x * keep / (1 - p) + residual of the failing case, all elements kept (p = 2^-7
keeps 99%), formed as the kernel did on the GPU (fp64 arithmetic, the scale rounded to fp32: a
float argument reaches a compiled kernel as fp32) and as it does now (the scale's fp32 part and
the rest), against the exact value. Prints each form's largest error in eps * |s|.

    python benchmarks/results/2026-11-24-h100-2/call11/check_split_scale.py
"""
import json
import re
from pathlib import Path

import torch

from harness.case import Case

repro = Path(__file__).with_name("dropout_add_norm-triton-forward-float32-88572ba7e6.py").read_text()
case = Case.from_json(json.loads(re.search(r"CASE = '(.*)'", repro).group(1)))
tensors = case.build("cpu")
x, r = tensors["x"].tensor.double(), tensors["residual"].tensor.double()
exact = 1 / (1 - case.scalars["p"])
hi = float(torch.tensor(exact, dtype=torch.float32))
lo = float(torch.tensor(exact - hi, dtype=torch.float32))
truth = x * exact + r
unit = torch.finfo(torch.float32).eps * truth.abs().clamp_min(1e-38)
for name, s in (("fp32 scale (before)", x * hi + r), ("split scale (now)", x * hi + x * lo + r)):
    err = (s.float().double() - truth).abs() / unit
    print(f"{name}: largest error {err.max():.2f} eps * |s|, {(err > 1).sum().item()} elements over 1")
