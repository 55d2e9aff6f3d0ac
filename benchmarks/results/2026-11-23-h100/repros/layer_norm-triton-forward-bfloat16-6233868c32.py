"""Reproduces a harness failure. Run: python .harness/repros/layer_norm-triton-forward-bfloat16-6233868c32.py

layer_norm[triton] forward (bfloat16) FAILED
case:
  kernel layer_norm, dtype bfloat16, dims {'*batch': [], 'rows': 8, 'cols': 2}
    x: shape (8, 2) bfloat16, layout contiguous, values normal (seed 0)
    weight: shape (2,) bfloat16, layout contiguous, values normal (seed 0)
    bias: shape (2,) bfloat16, layout contiguous, values normal (seed 0)
    eps = 1e-05
    affine = 'weight+bias'
    grad_output: layout class contiguous, seed 0
what went wrong:
  out: numerics score 2.54 (OVER budget 2); max abs error 0.000525 (eager 0.000525), max rel error 0.0232, envelope atol of that row 1.32e-09; worst at index (6, 1): kernel=-1.02818e-06 eager=-1.05053e-06 oracle=-1.05258e-06
reproduce:
  harness repro '{"dims": {"*batch": [], "cols": 2, "rows": 8}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight+bias", "eps": 1e-05}, "schema": 1, "spec": "layer_norm", "tensors": {"bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2], "values": "normal"}, "weight": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2], "values": "normal"}, "x": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [8, 2], "values": "normal"}}}' --implementation triton --check forward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"*batch": [], "cols": 2, "rows": 8}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight+bias", "eps": 1e-05}, "schema": 1, "spec": "layer_norm", "tensors": {"bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2], "values": "normal"}, "weight": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2], "values": "normal"}, "x": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [8, 2], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'forward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
