"""Run LayerNorm's and RMSNorm's forward (this project's kernel and torch.compile's) twice at each
ROWSxCOLS:DTYPE named on the command line, for ncu to profile side by side."""
import sys

import torch
import torch.nn.functional as F

from kernels.layer_norm import layer_norm
from kernels.rms_norm import rms_norm

compiled_ln = torch.compile(lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b), dynamic=False)
compiled_rms = torch.compile(lambda x, w: F.rms_norm(x, x.shape[-1:], w), dynamic=False)
for item in sys.argv[1:]:
    shape, dtype = item.split(":")
    rows, cols = (int(v) for v in shape.split("x"))
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype))
    w, b = torch.randn(cols, device="cuda", dtype=x.dtype), torch.randn(cols, device="cuda", dtype=x.dtype)
    for _ in range(2):
        layer_norm(x, w, b)
        compiled_ln(x, w, b)
        rms_norm(x, w)
        compiled_rms(x, w)
    torch.cuda.synchronize()
