"""dlrm_interaction's fp32 forward (production) and eager bmm against the float64 interaction:
the largest error in units of eps * sum |terms| (the spec's envelope floor), over 3 random inputs
a shape. Writes JSON to argv[1]."""
import json
import sys

import torch
import triton

import kernels.dlrm_interaction as dlrm
from references.dlrm_interaction import dlrm_interaction as reference, term_magnitudes

device = torch.device("cuda", 0)
eps = torch.finfo(torch.float32).eps
results = []
for batch, features, dim in ((65536, 26, 64), (65536, 26, 16), (4096, 26, 260), (4096, 64, 128)):
    worst = {"triton": 0.0, "eager": 0.0}
    for seed in range(3):
        gen = torch.Generator(device=device).manual_seed(seed)
        dense = torch.randn(batch, dim, device=device, generator=gen)
        sparse = torch.randn(batch, features, dim, device=device, generator=gen)
        exact = reference(dense.double(), sparse.double())
        floor = eps * term_magnitudes(dense.double(), sparse.double())
        for name, out in (("triton", dlrm._forward(dense, sparse)), ("eager", reference(dense, sparse))):
            worst[name] = max(worst[name], ((out.double() - exact).abs() / floor).max().item())
    row = {"shape": [batch, features, dim], "max_error_eps_terms": worst}
    print(row, flush=True)
    results.append(row)
with open(sys.argv[1], "w") as handle:
    json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "results": results}, handle, indent=1)
