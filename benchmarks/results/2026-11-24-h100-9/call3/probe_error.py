"""Call 3 probe: dlrm_interaction's fp32 forward and backward (production) and eager against the
float64 interaction and its gradients: the largest error in units of eps * sum |terms| (the spec's
envelope floor), over 3 random inputs a case, with the dense vector at scale 1 and 1e3 (the
nightly's failing backward case had a dense vector of scale ~1e3). Writes JSON to argv[1]."""
import json
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))

import kernels.dlrm_interaction as dlrm  # noqa: E402
from references.dlrm_interaction import dlrm_interaction as reference, gradient_term_magnitudes, term_magnitudes  # noqa: E402

device = torch.device("cuda", 0)
eps = torch.finfo(torch.float32).eps


def gradients(fn, dense, sparse, grad):
    leaves = [dense.detach().requires_grad_(True), sparse.detach().requires_grad_(True)]
    return torch.autograd.grad(fn(*leaves), leaves, grad)


results = []
for batch, features, dim, scale in ((65536, 26, 64, 1.0), (65536, 26, 64, 1e3), (65536, 26, 16, 1e3),
                                    (4096, 16, 32, 1e3), (4096, 64, 128, 1.0), (4096, 26, 260, 1e3)):
    worst = {f"{kind}_{impl}": 0.0 for kind in ("forward", "ddense", "dsparse") for impl in ("triton", "eager")}
    for seed in range(3):
        gen = torch.Generator(device=device).manual_seed(seed)
        dense = torch.randn(batch, dim, device=device, generator=gen) * scale
        sparse = torch.randn(batch, features, dim, device=device, generator=gen)
        t = features + 1
        grad = torch.randn(batch, dim + t * (t - 1) // 2, device=device, generator=gen)
        wide = (dense.double(), sparse.double())
        floor = eps * term_magnitudes(*wide)
        for impl, fn in (("triton", dlrm.dlrm_interaction), ("eager", reference)):
            out = fn(dense, sparse)
            worst[f"forward_{impl}"] = max(worst[f"forward_{impl}"], ((out.double() - reference(*wide)).abs() / floor).max().item())
        exact = gradients(reference, *wide, grad.double())
        terms = gradient_term_magnitudes(*wide, (grad.double(),))
        for impl, fn in (("triton", dlrm.dlrm_interaction), ("eager", reference)):
            for name, got, want in zip(("dense", "sparse"), gradients(fn, dense, sparse, grad), exact):
                size = terms[name] * eps
                key = f"d{name}_{impl}"
                worst[key] = max(worst[key], ((got.double() - want).abs() / size).max().item())
    row = {"shape": [batch, features, dim], "dense_scale": scale, "max_error_eps_terms": worst}
    print(row, flush=True)
    results.append(row)
with open(sys.argv[1], "w") as handle:
    json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "results": results}, handle, indent=1)
