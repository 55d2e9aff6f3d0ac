"""Call 1 probe: what torch.compile does differently at the short-row shapes where it leads by 1-3%
(softmax 32768 x 128 fp32; LayerNorm and RMSNorm 65536 x 256 bf16; RMSNorm 16384 x 1024 bf16).

argv[1] = "code": writes the Triton source inductor generated for each case (after its first call,
so after its autotuning) to $OUT/code_<case>.py, and times ours, compile's and a same-size copy
interleaved (300 repetitions, L2 flushed) into $OUT/times.json.
argv[1] = "ncu": one launch each of ours, compile's and a copy per case between cudaProfilerStart and
Stop, for ``ncu --profile-from-start off`` (grid, block, registers, waves, DRAM throughput).
"""
import json
import os
import sys

import torch
from torch._inductor.utils import run_and_get_code

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
from harness.bench.timing import TimingPlan, median, time_interleaved  # noqa: E402
import kernels.layer_norm as layer_norm  # noqa: E402
import kernels.rms_norm as rms_norm  # noqa: E402
import kernels.softmax as softmax  # noqa: E402
import references.layer_norm as ref_ln  # noqa: E402
import references.rms_norm as ref_rms  # noqa: E402
import references.softmax as ref_sm  # noqa: E402

device = torch.device("cuda", 0)
torch.set_grad_enabled(False)


def cases():
    bf = torch.bfloat16
    yield "softmax_32768x128_fp32", (lambda x: softmax.softmax(x)), ref_sm.softmax, (32768, 128), torch.float32, 0
    yield "layer_norm_65536x256_bf16", layer_norm.layer_norm, ref_ln.layer_norm, (65536, 256), bf, 2
    yield "rms_norm_65536x256_bf16", rms_norm.rms_norm, ref_rms.rms_norm, (65536, 256), bf, 1
    yield "rms_norm_16384x1024_bf16", rms_norm.rms_norm, ref_rms.rms_norm, (16384, 1024), bf, 1


def inputs(shape, dtype, n_vectors):
    x = torch.randn(*shape, device=device, dtype=dtype)
    vectors = [torch.randn(shape[-1], device=device, dtype=dtype) for _ in range(n_vectors)]
    return (x, *vectors)


mode = sys.argv[1]
out = os.environ.get("OUT", ".")
results = {}
for name, ours, reference, shape, dtype, n_vectors in cases():
    compiled = torch.compile(reference, dynamic=False)
    sets = [inputs(shape, dtype, n_vectors) for _ in range(3)]
    _, code = run_and_get_code(compiled, *sets[0])
    if mode == "code":
        with open(os.path.join(out, f"code_{name}.py"), "w") as f:
            f.write("\n\n# ---- next module ----\n\n".join(code))
        want = reference(*sets[0])
        diffs = {k: float((f(*sets[0]).float() - want.float()).abs().max()) for k, f in (("ours", ours), ("compile", compiled))}
        calls = {"ours": lambda i: ours(*sets[i]), "compile": lambda i: compiled(*sets[i]),
                 "copy": lambda i: sets[i][0].clone()}
        times = time_interleaved(calls, device, TimingPlan(warmup=10, repetitions=300, input_sets=3))
        results[name] = {"median_ms": {k: round(median(v), 5) for k, v in times.items()}, "max_abs_diff_from_eager": diffs}
        print(name, results[name], flush=True)
    else:
        for _ in range(3):
            ours(*sets[0]); compiled(*sets[0]); sets[0][0].clone()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        ours(*sets[1]); compiled(*sets[1]); sets[1][0].clone()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
if mode == "code":
    json.dump(results, open(os.path.join(out, "times.json"), "w"), indent=1)
