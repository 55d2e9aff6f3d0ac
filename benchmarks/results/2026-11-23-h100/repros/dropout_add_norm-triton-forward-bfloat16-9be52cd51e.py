"""Reproduces a harness failure. Run: python .harness/repros/dropout_add_norm-triton-forward-bfloat16-9be52cd51e.py

dropout_add_norm[triton] forward (bfloat16) FAILED
case:
  kernel dropout_add_norm, dtype bfloat16, dims {'*batch': [], 'rows': 1, 'cols': 129}
    x: shape (1, 129) bfloat16, layout contiguous, values normal (seed 0)
    residual: shape (1, 129) bfloat16, layout contiguous, values small (seed 0)
    bias: shape (129,) bfloat16, layout contiguous, values small (seed 0)
    weight: shape (129,) bfloat16, layout contiguous, values normal (seed 0)
    norm_bias: shape (129,) bfloat16, layout contiguous, values normal (seed 0)
    p = 0.0
    seed = 0
    norm = 'layer'
    eps = 1e-05
    prenorm = False
    return_mask = False
    affine = 'weight+bias'
    with_bias = True
    grad_output: layout class contiguous, seed 0
what went wrong:
  out: numerics score 2.01 (OVER budget 2); max abs error 0.0285 (eager 0.0285), max rel error 0.0157, envelope atol of that row 1.18e-38; worst at index (0, 2): kernel=0.00476074 eager=0.00485229 oracle=0.0048367
reproduce:
  harness repro '{"dims": {"*batch": [], "cols": 129, "rows": 1}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight+bias", "eps": 1e-05, "norm": "layer", "p": 0.0, "prenorm": false, "return_mask": false, "seed": 0, "with_bias": true}, "schema": 1, "spec": "dropout_add_norm", "tensors": {"bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [129], "values": "small"}, "norm_bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [129], "values": "normal"}, "residual": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 129], "values": "small"}, "weight": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [129], "values": "normal"}, "x": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 129], "values": "normal"}}}' --implementation triton --check forward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"*batch": [], "cols": 129, "rows": 1}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"affine": "weight+bias", "eps": 1e-05, "norm": "layer", "p": 0.0, "prenorm": false, "return_mask": false, "seed": 0, "with_bias": true}, "schema": 1, "spec": "dropout_add_norm", "tensors": {"bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [129], "values": "small"}, "norm_bias": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [129], "values": "normal"}, "residual": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 129], "values": "small"}, "weight": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [129], "values": "normal"}, "x": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 129], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'forward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
