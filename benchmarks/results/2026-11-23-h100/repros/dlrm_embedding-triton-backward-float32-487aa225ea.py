"""Reproduces a harness failure. Run: python .harness/repros/dlrm_embedding-triton-backward-float32-487aa225ea.py

dlrm_embedding[triton] backward (float32) FAILED
case:
  kernel dlrm_embedding, dtype float32, dims {'batch': 251, 'features': 1, 'rows': 31, 'dim': 1}
    ids: shape (251, 1) int64, layout contiguous, values int64_ids (seed 0)
    weights: shape (31, 1) float32, layout contiguous, values normal (seed 0)
    cardinalities = [1]
    grad_output: layout class broadcast, seed 0
what went wrong:
  grad weights (grad_output broadcast): numerics score 8.78 (OVER budget 2); max abs error 0.0017 (eager 0.000179), max rel error 2.94e-06, envelope atol of that row 0.000109; worst at index (0, 0): kernel=-579.915 eager=-579.914 oracle=-579.913
  grad weights (grad_output contiguous): numerics score 0.213 (within budget 2); max abs error 4.96e-06 (eager 2.67e-06), max rel error 2.93e-07, envelope atol of that row 1.66e-06; worst at index (0, 0): kernel=-16.938 eager=-16.938 oracle=-16.938
reproduce:
  harness repro '{"dims": {"batch": 251, "dim": 1, "features": 1, "rows": 31}, "dtype": "float32", "grad_layout": "broadcast", "grad_seed": 0, "scalars": {"cardinalities": [1]}, "schema": 1, "spec": "dlrm_embedding", "tensors": {"ids": {"dtype": "int64", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [251, 1], "values": "int64_ids"}, "weights": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [31, 1], "values": "normal"}}}' --implementation triton --check backward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"batch": 251, "dim": 1, "features": 1, "rows": 31}, "dtype": "float32", "grad_layout": "broadcast", "grad_seed": 0, "scalars": {"cardinalities": [1]}, "schema": 1, "spec": "dlrm_embedding", "tensors": {"ids": {"dtype": "int64", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [251, 1], "values": "int64_ids"}, "weights": {"dtype": "float32", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [31, 1], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'backward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
