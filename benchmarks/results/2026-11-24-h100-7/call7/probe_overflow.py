"""Call 6's one failure: dropout_add_norm fp16 RMSNorm backward, one row of 5, x huge, p = 0.9. The
kernel's kept -14336 * 10 overflows fp16, so s = -inf, rstd = 0 and grad weight = 0, as on the CPU
(interpreter and CPU eager agree); the H100's eager reference gave 0.0074, the fp64 oracle's value.
Print each step of eager's composite on this GPU, with the kernel's mask, to see where it differs."""

import torch
import torch.nn.functional as F

from kernels.dropout_add_norm import dropout_add_norm
from references.dropout_add_norm import dropout_add_norm as reference

dev = torch.device("cuda")
h = torch.float16
x = torch.tensor([[-16160.0, -11176.0, 18720.0, -12272.0, -14336.0]], dtype=h, device=dev)
r = torch.tensor([[154.125, -29.34375, -217.875, 56.84375, -108.4375]], dtype=h, device=dev)
w = torch.tensor([1.541015625, -0.29345703125, -2.1796875, 0.568359375, -1.0849609375], dtype=h, device=dev)
dy = torch.randn(1, 5, generator=torch.Generator().manual_seed(0)).to(dev, h)
y, keep = dropout_add_norm(x, r, None, w, None, p=0.9, seed=0, norm="rms", return_mask=True)
print("kernel keep", keep.tolist(), "y", y.tolist())
dropped = x * keep.to(h) * 10.0
s = dropped + r
print("eager dropped", dropped.tolist(), "s", s.tolist())
for dtype in (h, torch.float64):
    ws = w.to(dtype).requires_grad_()
    xs = x.to(dtype).requires_grad_()
    ye = reference(xs, r.to(dtype), None, ws, None, p=0.9, norm="rms", mask=keep)
    gx, gw = torch.autograd.grad(ye, (xs, ws), dy.to(dtype))
    print(dtype, "y", ye.tolist(), "grad x", gx.tolist(), "grad w", gw.tolist())
ss = s.clone().requires_grad_()
yr = F.rms_norm(ss, (5,), w, 1e-5)
print("F.rms_norm on s", yr.tolist(), "grad s", torch.autograd.grad(yr, ss, dy)[0].tolist())
