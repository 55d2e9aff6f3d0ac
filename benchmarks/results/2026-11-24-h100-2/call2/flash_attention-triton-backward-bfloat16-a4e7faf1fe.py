"""Reproduces a harness failure. Run: python .harness/repros/flash_attention-triton-backward-bfloat16-a4e7faf1fe.py

flash_attention[triton] backward (bfloat16) FAILED
case:
  kernel flash_attention, dtype bfloat16, dims {'batch': 1, 'heads': 1, 'seq': 1, 'head_dim': 64}
    q: shape (1, 1, 1, 64) bfloat16, layout permuted(1, 3, 2, 0), stepped(1, 3, 2, 2), offset 1, broadcast dims (0, 1, 2, 3), values normal (seed 14292)
    k: shape (1, 1, 1, 64) bfloat16, layout permuted(0, 3, 2, 1), stepped(2, 1, 3, 3), offset 11, broadcast dims (0, 3), values normal (seed 482912)
    v: shape (1, 1, 1, 64) bfloat16, layout permuted(0, 3, 2, 1), stepped(1, 3, 1, 3), offset 10, broadcast dims (1,), values large (seed 33554431)
    causal = False
    scale = 0.7545119524002075
    grad_output: layout class broadcast, seed 1602
what went wrong:
  raised AcceleratorError: CUDA error: an illegal memory access was encountered
  Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
  CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
  For debugging consider passing CUDA_LAUNCH_BLOCKING=1
  Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
  
  this CUDA error leaves the process's context unusable, so every later case fails the same way: the case above is the first that raised it, not a shrunk one
reproduce:
  harness repro '{"dims": {"batch": 1, "head_dim": 64, "heads": 1, "seq": 1}, "dtype": "bfloat16", "grad_layout": "broadcast", "grad_seed": 1602, "scalars": {"causal": false, "scale": 0.7545119524002075}, "schema": 1, "spec": "flash_attention", "tensors": {"k": {"dtype": "bfloat16", "layout": {"expanded": [0, 3], "offset": 11, "perm": [0, 3, 2, 1], "steps": [2, 1, 3, 3]}, "seed": 482912, "shape": [1, 1, 1, 64], "values": "normal"}, "q": {"dtype": "bfloat16", "layout": {"expanded": [0, 1, 2, 3], "offset": 1, "perm": [1, 3, 2, 0], "steps": [1, 3, 2, 2]}, "seed": 14292, "shape": [1, 1, 1, 64], "values": "normal"}, "v": {"dtype": "bfloat16", "layout": {"expanded": [1], "offset": 10, "perm": [0, 3, 2, 1], "steps": [1, 3, 1, 3]}, "seed": 33554431, "shape": [1, 1, 1, 64], "values": "large"}}}' --implementation triton --check backward
"""
import sys

from harness.repro import replay

CASE = '{"dims": {"batch": 1, "head_dim": 64, "heads": 1, "seq": 1}, "dtype": "bfloat16", "grad_layout": "broadcast", "grad_seed": 1602, "scalars": {"causal": false, "scale": 0.7545119524002075}, "schema": 1, "spec": "flash_attention", "tensors": {"k": {"dtype": "bfloat16", "layout": {"expanded": [0, 3], "offset": 11, "perm": [0, 3, 2, 1], "steps": [2, 1, 3, 3]}, "seed": 482912, "shape": [1, 1, 1, 64], "values": "normal"}, "q": {"dtype": "bfloat16", "layout": {"expanded": [0, 1, 2, 3], "offset": 1, "perm": [1, 3, 2, 0], "steps": [1, 3, 2, 2]}, "seed": 14292, "shape": [1, 1, 1, 64], "values": "normal"}, "v": {"dtype": "bfloat16", "layout": {"expanded": [1], "offset": 10, "perm": [0, 3, 2, 1], "steps": [1, 3, 1, 3]}, "seed": 33554431, "shape": [1, 1, 1, 64], "values": "large"}}}'
IMPLEMENTATION = 'triton'
CHECK = 'backward'

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
