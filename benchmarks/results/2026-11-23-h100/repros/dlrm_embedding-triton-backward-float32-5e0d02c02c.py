"""Reproduces a harness failure. Run: python .harness/repros/dlrm_embedding-triton-backward-float32-5e0d02c02c.py

dlrm_embedding[triton] backward (float32) FAILED
case:
  kernel dlrm_embedding, dtype float32, dims {'batch': 293, 'features': 1, 'rows': 31, 'dim': 1}
    ids: shape (293, 1) int64, layout contiguous, values int64_ids (seed 0)
    weights: shape (31, 1) float32, layout contiguous, values normal (seed 0)
    cardinalities = [31]
    grad_output: layout class contiguous, seed 0
what went wrong:
  grad weights (grad_output contiguous): numerics score 2.64 (OVER budget 2); max abs error 2.21e-06 (eager 6.78e-07), max rel error 2.47e-06, envelope atol of that row 1.18e-38; worst at index (23, 0): kernel=-1.14482 eager=-1.14482 oracle=-1.14482
reproduce:
  harness repro '{"dims": {"batch": 293, "dim": 1, "features": 1, "rows": 31}, "dtype": "float32", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"cardinalities": [31]}, "schema": 1, "spec": "dlrm_embedding", "tensors": {"ids": {"dtype": "int64", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [293, 1], "values": "int64_ids"}, "weights": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [31, 1], "values": "normal"}}}' --implementation triton --check backward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"batch": 293, "dim": 1, "features": 1, "rows": 31}, "dtype": "float32", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"cardinalities": [31]}, "schema": 1, "spec": "dlrm_embedding", "tensors": {"ids": {"dtype": "int64", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [293, 1], "values": "int64_ids"}, "weights": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [31, 1], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'backward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
