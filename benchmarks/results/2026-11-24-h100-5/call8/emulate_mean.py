"""The fp32 mean of bf16 rows shifted by their first element, summed as a GPU tree reduction does
(each thread its elements in order, then pairwise), emulated in numpy: its error in ulps of mean
|s - K|, plain and refined once with the mean of the deviations (kernels._norm._block_mean).
The GPU's approximate division is not modelled. python3 emulate_mean.py"""
import numpy as np
rng = np.random.default_rng(1)
f32 = np.float32
def bf16(a):
    a = a.astype(np.float32); b = a.view(np.uint32); b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.view(np.float32)
def tree(p):
    p = p.astype(np.float32)
    while p.shape[-1] > 1:
        p = (p[..., ::2] + p[..., 1::2]).astype(np.float32)   # butterfly-like pairing
    return p[..., 0]
def err(n, per_thread, rows=4000, refine=False):
    x = bf16(rng.standard_normal((rows, n)))
    k = x[:, :1]
    d = (x - k).astype(np.float32)
    part = d.reshape(rows, -1, per_thread)
    acc = np.zeros(part.shape[:2], np.float32)
    for j in range(per_thread): acc = (acc + part[..., j]).astype(np.float32)
    m = (tree(acc) / f32(n)).astype(np.float32)
    if refine:
        dev = (d - m[:, None]).astype(np.float32)
        p2 = dev.reshape(rows, -1, per_thread); a2 = np.zeros(p2.shape[:2], np.float32)
        for j in range(per_thread): a2 = (a2 + p2[..., j]).astype(np.float32)
        m = (m + tree(a2) / f32(n)).astype(np.float32)
    exact = d.astype(np.float64).mean(1)
    unit = np.abs(d.astype(np.float64)).mean(1) * 2**-23
    e = np.abs(m - exact) / unit
    return e.max(), np.quantile(e, 0.999)
for n, pt in ((256, 2), (512, 4), (1024, 8), (2048, 16), (4096, 8), (8192, 16), (16384, 32)):
    print(n, pt, "plain max %.2f p99.9 %.2f" % err(n, pt, rows=20000 if n < 4096 else 4000), " refined max %.2f" % err(n, pt, rows=4000, refine=True)[0])
