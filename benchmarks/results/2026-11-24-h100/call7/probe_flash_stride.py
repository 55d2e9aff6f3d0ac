"""Device probe: flash attention's bf16 head_dim-32 backward on the case compute-sanitizer flagged
(seq 1, v of strides (1, 1, 1, 1)), with the launchers' size-1 strides as PyTorch gives them (raw)
and canonical (fixed). Run each under compute-sanitizer."""
import sys
import torch
import kernels.flash_attention as fa

mode = sys.argv[1]
if mode == "raw":  # the launchers' strides as PyTorch gives them
    fa._rows.launch_strides = lambda t: tuple(t.stride())
g = torch.Generator(device="cuda").manual_seed(0)
q, k = (torch.randn(1, 1, 1, 32, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
v = torch.randn(32, 1, 1, 1, device="cuda", dtype=torch.bfloat16, generator=g).permute(3, 1, 2, 0)
print(mode, "v strides", v.stride(), flush=True)
q, k, v = (t.requires_grad_() for t in (q, k, v))
out, lse = fa.flash_attention(q, k, v)
grads = torch.autograd.grad([out, lse], [q, k, v], [torch.randn_like(out), torch.randn_like(lse)])
torch.cuda.synchronize()
print(mode, "ok", [float(x.float().abs().sum()) for x in grads], flush=True)
