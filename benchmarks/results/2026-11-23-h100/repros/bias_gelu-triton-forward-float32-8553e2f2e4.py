"""Reproduces a harness failure. Run: python .harness/repros/bias_gelu-triton-forward-float32-8553e2f2e4.py

bias_gelu[triton] forward (float32) FAILED
case:
  kernel bias_gelu, dtype float32, dims {'*batch': [], 'rows': 16, 'cols': 4}
    x: shape (16, 4) float32, layout contiguous, values small (seed 1)
    bias: shape (4,) float32, layout contiguous, values normal (seed 0)
    approximate = 'none'
    grad_output: layout class contiguous, seed 0
what went wrong:
  out: numerics score 2.05 (OVER budget 2); max abs error 8.26e-08 (eager 1.2e-07), max rel error 2.59e-07, envelope atol of that row 1.18e-38; worst at index (14, 2): kernel=-0.0319122 eager=-0.0319122 oracle=-0.0319122
reproduce:
  harness repro '{"dims": {"*batch": [], "cols": 4, "rows": 16}, "dtype": "float32", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"approximate": "none"}, "schema": 1, "spec": "bias_gelu", "tensors": {"bias": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4], "values": "normal"}, "x": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 1, "shape": [16, 4], "values": "small"}}}' --implementation triton --check forward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"*batch": [], "cols": 4, "rows": 16}, "dtype": "float32", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"approximate": "none"}, "schema": 1, "spec": "bias_gelu", "tensors": {"bias": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [4], "values": "normal"}, "x": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 1, "shape": [16, 4], "values": "small"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'forward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
