"""Run dlrm_interaction's kernels once per launch named on the command line, for ncu to profile:
KERNEL:DTYPE:BATCH:DIM[:BB,BT,BD,W] (KERNEL forward or backward; launch as in _forward's override)."""
import sys

import torch

import kernels.dlrm_interaction as dlrm

for item in sys.argv[1:]:
    parts = item.split(":")
    kernel, dtype, batch, dim = parts[0], getattr(torch, parts[1]), int(parts[2]), int(parts[3])
    launch = tuple(int(v) for v in parts[4].split(",")) if len(parts) > 4 else None
    dense = torch.randn(batch, dim, device="cuda", dtype=dtype)
    sparse = torch.randn(batch, 26, dim, device="cuda", dtype=dtype)
    grad = torch.randn(batch, dim + 27 * 26 // 2, device="cuda", dtype=dtype)
    for _ in range(2):
        if kernel == "forward":
            dlrm._forward(dense, sparse, launch=launch)
        else:
            dlrm._backward(dense, sparse, grad, launch=launch)
    torch.cuda.synchronize()
