"""Call 6: the short-row forwards where torch.compile stays ahead (LayerNorm and RMSNorm at
65536 x 256 bf16, softmax at 32768 x 128 fp32), ours then compile's, once each between
cudaProfilerStart and Stop, for ``ncu --profile-from-start off``."""

import torch
import torch.nn.functional as F

from kernels.layer_norm import layer_norm
from kernels.rms_norm import rms_norm
from kernels.softmax import softmax

dev = "cuda"
x = torch.randn(65536, 256, device=dev, dtype=torch.bfloat16)
w, b = torch.randn(256, device=dev, dtype=torch.bfloat16), torch.randn(256, device=dev, dtype=torch.bfloat16)
xs = torch.randn(32768, 128, device=dev)
pairs = [
    (lambda: layer_norm(x, w, b), torch.compile(lambda: F.layer_norm(x, (256,), w, b))),
    (lambda: rms_norm(x, w), torch.compile(lambda: F.rms_norm(x, (256,), w))),
    (lambda: softmax(xs), torch.compile(lambda: torch.softmax(xs, -1))),
]
with torch.no_grad():
    for ours, theirs in pairs:
        for _ in range(3):
            ours(), theirs()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for ours, theirs in pairs:
        ours()
        theirs()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
