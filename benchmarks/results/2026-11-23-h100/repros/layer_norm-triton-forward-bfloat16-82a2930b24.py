"""Reproduces a harness failure. Run: python .harness/repros/layer_norm-triton-forward-bfloat16-82a2930b24.py

layer_norm[triton] forward (bfloat16) FAILED
case:
  kernel layer_norm, dtype bfloat16, dims {'*batch': [], 'rows': 4, 'cols': 1021}
    x: shape (4, 1021) bfloat16, layout contiguous, values normal (seed 0)
    weight: shape (1021,) bfloat16, layout contiguous, values normal (seed 0)
    bias: shape (1021,) bfloat16, layout contiguous, values normal (seed 0)
    eps = 1e-05
    affine = 'weight'
    grad_output: layout class contiguous, seed 0
what went wrong:
  out: numerics score 2.31 (OVER budget 2); max abs error 0.0264 (eager 0.0264), max rel error 0.0181, envelope atol of that row 1.18e-38; worst at index (2, 126): kernel=-5.24521e-06 eager=-5.1558e-06 oracle=-5.1521e-06
reproduce:
  harness repro '{"dims": {"*batch": [], "cols": 1021, "rows": 4}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight", "eps": 1e-05}, "schema": 1, "spec": "layer_norm", "tensors": {"bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1021], "values": "normal"}, "weight": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1021], "values": "normal"}, "x": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4, 1021], "values": "normal"}}}' --implementation triton --check forward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"*batch": [], "cols": 1021, "rows": 4}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight", "eps": 1e-05}, "schema": 1, "spec": "layer_norm", "tensors": {"bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1021], "values": "normal"}, "weight": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1021], "values": "normal"}, "x": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4, 1021], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'forward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
