"""dlrm_interaction's fp32 forward with TF32 against bf16 pieces (SPLIT_PIECE), at the production
tile, interleaved with eager, torch.compile and a copy of the sparse input; then each variant's
largest error on one input, in units of eps * sum |terms| (what the spec's envelope floors at).
Writes JSON to argv[1]."""
import json
import sys

import torch
import triton

import kernels.dlrm_interaction as dlrm
from harness.bench.timing import TimingPlan, median, time_interleaved
from references.dlrm_interaction import dlrm_interaction as reference, term_magnitudes

device = torch.device("cuda", 0)
results = []
for batch, features, dim in ((65536, 26, 64), (65536, 26, 16)):
    sets = [(torch.randn(batch, dim, device=device), torch.randn(batch, features, dim, device=device)) for _ in range(3)]
    copies = [torch.empty_like(s) for _, s in sets]
    compiled = torch.compile(reference, dynamic=False)

    def variant(piece):
        def call(i):
            dlrm.SPLIT_PIECE = piece
            return dlrm._forward(*sets[i])
        return call

    calls = {"tf32": variant("tf32"), "bf16": variant("bf16"), "eager": lambda i: reference(*sets[i]),
             "compile": lambda i: compiled(*sets[i]), "copy_sparse": lambda i: copies[i].copy_(sets[i][1])}
    medians = {k: median(v) for k, v in time_interleaved(calls, device, TimingPlan(repetitions=30)).items()}
    dense, sparse = sets[0]
    exact = reference(dense.double(), sparse.double())
    terms = term_magnitudes(dense=dense.double(), sparse=sparse.double())
    eps = torch.finfo(torch.float32).eps
    errors = {}
    for piece in ("tf32", "bf16"):
        dlrm.SPLIT_PIECE = piece
        errors[piece] = ((dlrm._forward(dense, sparse).double() - exact).abs() / (eps * terms + 1e-300)).max().item()
    errors["eager"] = ((reference(dense, sparse).double() - exact).abs() / (eps * terms + 1e-300)).max().item()
    dlrm.SPLIT_PIECE = "tf32"
    row = {"shape": [batch, features, dim], "median_ms": medians, "max_error_eps_terms": errors}
    print(row, flush=True)
    results.append(row)
    torch._dynamo.reset()
with open(sys.argv[1], "w") as handle:
    json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "results": results}, handle, indent=1)
