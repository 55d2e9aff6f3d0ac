"""Reproduces a harness failure. Run: python .harness/repros/dropout_add_norm-triton-forward-float32-88572ba7e6.py

dropout_add_norm[triton] forward (float32) FAILED
case:
  kernel dropout_add_norm, dtype float32, dims {'*batch': [2, 2], 'rows': 251, 'cols': 4031}
    x: shape (2, 2, 251, 4031) float32, layout contiguous, values normal (seed 0)
    residual: shape (2, 2, 251, 4031) float32, layout contiguous, values small (seed 7)
    bias: shape (4031,) float32, layout contiguous, values normal (seed 0)
    weight: shape (4031,) float32, layout contiguous, values normal (seed 0)
    norm_bias: shape (4031,) float32, layout contiguous, values normal (seed 0)
    p = 0.0078125
    seed = 0
    norm = 'layer'
    eps = 1e-05
    prenorm = True
    return_mask = False
    affine = 'weight+bias'
    with_bias = False
    grad_output: layout class contiguous, seed 0
what went wrong:
  out1: numerics score 5.54 (OVER budget 2); max abs error 2.55e-07 (eager 4.64e-07), max rel error 2.85e-05, envelope atol of that row 3.15e-13; worst at index (1, 1, 141, 1478): kernel=-5.04311e-06 eager=-5.04311e-06 oracle=-5.04311e-06
  out: numerics score 0.486 (within budget 2); max abs error 8.23e-07 (eager 1.77e-06), max rel error 0.201, envelope atol of that row 3.4e-07; worst at index (0, 0, 78, 1661): kernel=8.65629 eager=8.65629 oracle=8.65629
reproduce:
  harness repro '{"dims": {"*batch": [2, 2], "cols": 4031, "rows": 251}, "dtype": "float32", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight+bias", "eps": 1e-05, "norm": "layer", "p": 0.0078125, "prenorm": true, "return_mask": false, "seed": 0, "with_bias": false}, "schema": 1, "spec": "dropout_add_norm", "tensors": {"bias": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4031], "values": "normal"}, "norm_bias": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4031], "values": "normal"}, "residual": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 7, "shape": [2, 2, 251, 4031], "values": "small"}, "weight": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4031], "values": "normal"}, "x": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2, 2, 251, 4031], "values": "normal"}}}' --implementation triton --check forward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"*batch": [2, 2], "cols": 4031, "rows": 251}, "dtype": "float32", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight+bias", "eps": 1e-05, "norm": "layer", "p": 0.0078125, "prenorm": true, "return_mask": false, "seed": 0, "with_bias": false}, "schema": 1, "spec": "dropout_add_norm", "tensors": {"bias": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4031], "values": "normal"}, "norm_bias": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4031], "values": "normal"}, "residual": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 7, "shape": [2, 2, 251, 4031], "values": "small"}, "weight": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4031], "values": "normal"}, "x": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2, 2, 251, 4031], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'forward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
