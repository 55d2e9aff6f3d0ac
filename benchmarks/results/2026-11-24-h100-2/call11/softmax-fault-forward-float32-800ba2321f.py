"""Reproduces a harness failure. Run: python .harness/repros/softmax-fault-forward-float32-800ba2321f.py

softmax[fault] forward (float32) FAILED
case:
  kernel softmax, dtype float32, dims {'*batch': [], 'rows': 133, 'cols': 32769}
    x: shape (133, 32769) float32, layout broadcast dims (0,), values neg_inf_mask (seed 184210985)
    grad_output: layout class permuted, seed 741
what went wrong:
  raised AcceleratorError: CUDA error: an illegal memory access was encountered
  Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
  CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
  For debugging consider passing CUDA_LAUNCH_BLOCKING=1
  Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
  
  this CUDA error leaves the process's context unusable, so every later case fails the same way: the case above is the first that raised it, not a shrunk one
reproduce:
  harness repro '{"dims": {"*batch": [], "cols": 32769, "rows": 133}, "dtype": "float32", "grad_layout": "permuted", "grad_seed": 741, "scalars": {}, "schema": 1, "spec": "softmax", "tensors": {"x": {"dtype": "float32", "layout": {"expanded": [0], "offset": 0, "perm": [], "steps": []}, "seed": 184210985, "shape": [133, 32769], "values": "neg_inf_mask"}}}' --implementation fault --check forward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"*batch": [], "cols": 32769, "rows": 133}, "dtype": "float32", "grad_layout": "permuted", "grad_seed": 741, "scalars": {}, "schema": 1, "spec": "softmax", "tensors": {"x": {"dtype": "float32", "layout": {"expanded": [0], "offset": 0, "perm": [], "steps": []}, "seed": 184210985, "shape": [133, 32769], "values": "neg_inf_mask"}}}'
IMPLEMENTATION = 'fault'
CHECK = 'forward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
