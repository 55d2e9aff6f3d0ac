"""Call 2: torch.compile's generated code for call 1's norm and softmax ops (their files did not
come back from call 1), one file each under OUTDIR."""
import os
import re
import sys

import torch
from torch._inductor.utils import run_and_get_code

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "call1"))
import probe_hints  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for label, (rows, cols, dtype), make, _, reference, _ in probe_hints.ops():
    if label.split()[0] not in ("layer_norm", "rms_norm", "softmax"):
        continue
    args = make(torch.randn(rows, cols, device="cuda", dtype=dtype))
    _, codes = run_and_get_code(torch.compile(reference, dynamic=False), *args)
    with open(os.path.join(out, re.sub(r"[^A-Za-z0-9]+", "_", label) + ".py"), "w") as f:
        f.write("\n\n# ----\n\n".join(codes))
    torch._dynamo.reset()
