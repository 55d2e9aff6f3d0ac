"""dlrm_interaction's fp32 forward (split products) over piece types, tiles and register caps,
interleaved with eager, torch.compile and a copy of the sparse input. Call 2's ncu run found the
one-warp TF32 forward at 255 registers a thread: 8 warps an SM (12.5% occupancy), 5.8 cycles
between a warp's instructions. Writes JSON to argv[1]."""
import json
import sys

import torch
import triton

import kernels.dlrm_interaction as dlrm
from harness.bench.timing import TimingPlan, median, time_interleaved
from references.dlrm_interaction import dlrm_interaction as reference

# name: (piece, BLOCK_B, warps, maxnreg)
VARIANTS = {"bf16_b1_w1": ("bf16", 1, 1, None), "bf16_b1_w1_r168": ("bf16", 1, 1, 168),
            "bf16_b1_w1_r128": ("bf16", 1, 1, 128), "bf16_b1_w2": ("bf16", 1, 2, None),
            "bf16_b2_w2": ("bf16", 2, 2, None), "bf16_b1_w4": ("bf16", 1, 4, None),
            "bf16_b4_w4": ("bf16", 4, 4, None), "bf16_b2_w2_r128": ("bf16", 2, 2, 128),
            "tf32_b1_w1": ("tf32", 1, 1, None)}
device = torch.device("cuda", 0)
results = []
for batch, features, dim in ((65536, 26, 64), (65536, 26, 16)):
    sets = [(torch.randn(batch, dim, device=device), torch.randn(batch, features, dim, device=device)) for _ in range(3)]
    copies = [torch.empty_like(s) for _, s in sets]
    compiled = torch.compile(reference, dynamic=False)
    _, block_t, block_d, _ = dlrm.gpu_launch(features, dim, torch.float32, "forward")

    def variant(piece, block_b, warps, maxnreg):
        def call(i):
            dlrm.SPLIT_PIECE, dlrm.FP32_FORWARD_MAXNREG = piece, maxnreg
            return dlrm._forward(*sets[i], launch=(block_b, block_t, block_d, warps))
        return call

    expected = reference(*sets[0])
    calls = {}
    wrong = []
    for name, spec in VARIANTS.items():
        got = variant(*spec)(0)
        if not torch.allclose(got, expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item()):
            wrong.append(name)
            continue
        calls[name] = variant(*spec)
    calls |= {"production": lambda i: (setattr(dlrm, "SPLIT_PIECE", "bf16"), setattr(dlrm, "FP32_FORWARD_MAXNREG", None),
                                       dlrm._forward(*sets[i]))[-1],
              "eager": lambda i: reference(*sets[i]), "compile": lambda i: compiled(*sets[i]),
              "copy_sparse": lambda i: copies[i].copy_(sets[i][1])}
    medians = {k: median(v) for k, v in time_interleaved(calls, device, TimingPlan(repetitions=30)).items()}
    dlrm.SPLIT_PIECE, dlrm.FP32_FORWARD_MAXNREG = "bf16", None
    row = {"shape": [batch, features, dim], "median_ms": medians, "wrong": wrong}
    print(batch, features, dim, "wrong:", wrong, flush=True)
    for k, v in sorted(medians.items(), key=lambda kv: kv[1]):
        print(f"   {k:18s} {v:.4f} ms", flush=True)
    results.append(row)
    torch._dynamo.reset()
with open(sys.argv[1], "w") as handle:
    json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "results": results}, handle, indent=1)
