"""Reproduces a harness failure. Run: python .harness/repros/flash_attention-triton-backward-bfloat16-d876ab8493.py

flash_attention[triton] backward (bfloat16) FAILED
case:
  kernel flash_attention, dtype bfloat16, dims {'batch': 1, 'heads': 1, 'seq': 1, 'head_dim': 32}
    q: shape (1, 1, 1, 32) bfloat16, layout contiguous, values normal (seed 0)
    k: shape (1, 1, 1, 32) bfloat16, layout contiguous, values normal (seed 0)
    v: shape (1, 1, 1, 32) bfloat16, layout permuted(3, 1, 2, 0), values normal (seed 0)
    causal = False
    scale = None
    grad_output: layout class contiguous, seed 0
what went wrong:
  raised AcceleratorError: CUDA error: an illegal memory access was encountered
  Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
  CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
  For debugging consider passing CUDA_LAUNCH_BLOCKING=1
  Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
  
  this CUDA error leaves the process's context unusable, so every later case fails the same way: the case above is the first that raised it, not a shrunk one
reproduce:
  harness repro '{"dims": {"batch": 1, "head_dim": 32, "heads": 1, "seq": 1}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"causal": false, "scale": null}, "schema": 1, "spec": "flash_attention", "tensors": {"k": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 1, 1, 32], "values": "normal"}, "q": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 1, 1, 32], "values": "normal"}, "v": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [3, 1, 2, 0], "steps": []}, "seed": 0, "shape": [1, 1, 1, 32], "values": "normal"}}}' --implementation triton --check backward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"batch": 1, "head_dim": 32, "heads": 1, "seq": 1}, "dtype": "bfloat16", "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"causal": false, "scale": null}, "schema": 1, "spec": "flash_attention", "tensors": {"k": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 1, 1, 32], "values": "normal"}, "q": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [1, 1, 1, 32], "values": "normal"}, "v": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [3, 1, 2, 0], "steps": []}, "seed": 0, "shape": [1, 1, 1, 32], "values": "normal"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'backward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
