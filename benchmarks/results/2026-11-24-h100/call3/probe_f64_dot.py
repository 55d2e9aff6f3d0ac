"""Device probe: does this Triton compile and run an fp64 tl.dot (2-D and batched 3-D), and how
fast is a per-sample fp64 Gram matrix? Prints one line per shape; the cause chain on failure."""
import sys, time, traceback
import torch, triton, triton.language as tl

print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(), flush=True)

@triton.jit
def k2d(Z, OUT, BT: tl.constexpr, BD: tl.constexpr):
    t = tl.arange(0, BT)
    d = tl.arange(0, BD)
    z = tl.load(Z + t[:, None] * BD + d[None, :]).to(tl.float64)
    g = tl.dot(z, tl.trans(z), tl.zeros([BT, BT], tl.float64))
    tl.store(OUT + t[:, None] * BT + t[None, :], g)

@triton.jit
def k3d(Z, OUT, BB: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    pid = tl.program_id(0)
    b = pid * BB + tl.arange(0, BB)[:, None, None]
    t = tl.arange(0, BT)[None, :, None]
    d = tl.arange(0, BD)[None, None, :]
    z = tl.load(Z + b * BT * BD + t * BD + d).to(tl.float64)
    g = tl.dot(z, tl.permute(z, (0, 2, 1)), tl.zeros([BB, BT, BT], tl.float64))
    t2 = tl.arange(0, BT)[None, None, :]
    tl.store(OUT + b * BT * BT + t * BT + t2, g.to(tl.float32))

def chain(e):
    out = []
    while e is not None:
        out.append(f"{type(e).__name__}: {str(e)[-600:]}")
        e = e.__cause__ or e.__context__
    return " <- ".join(out)

for bt, bd in ((32, 64), (16, 16), (32, 128)):
    z = torch.randn(bt, bd, device="cuda")
    out = torch.empty(bt, bt, device="cuda", dtype=torch.float64)
    try:
        k2d[(1,)](z, out, BT=bt, BD=bd)
        ref = z.double() @ z.double().T
        print("2d", bt, bd, "ok, max err", (out - ref).abs().max().item(), flush=True)
    except Exception as e:
        print("2d", bt, bd, "FAILED", chain(e), flush=True)

for bb, bt, bd in ((4, 32, 64), (16, 16, 16), (2, 32, 64), (1, 32, 64), (8, 32, 32)):
    n = 65536
    z = torch.randn(n, bt, bd, device="cuda")
    out = torch.empty(n, bt, bt, device="cuda", dtype=torch.float32)
    try:
        for w in (4, 8):
            k3d[(n // bb,)](z, out, BB=bb, BT=bt, BD=bd, num_warps=w)
            torch.cuda.synchronize()
            ref = torch.bmm(z[:64].double(), z[:64].double().transpose(1, 2))
            err = (out[:64].double() - ref).abs().max().item()
            ms = triton.testing.do_bench(lambda: k3d[(n // bb,)](z, out, BB=bb, BT=bt, BD=bd, num_warps=w))
            print("3d", bb, bt, bd, "warps", w, "ok, max err", err, f"{ms:.4f} ms for {n} samples", flush=True)
    except Exception as e:
        print("3d", bb, bt, bd, "FAILED", chain(e), flush=True)
