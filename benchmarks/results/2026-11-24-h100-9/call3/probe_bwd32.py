"""Call 3 probe: dlrm_interaction's fp32 backward on split products (exact bf16-piece products on
the tensor cores; 2026-11-24-h100-6's call 4 measured them at 0.78 ms at dim 64), at 1 or 2 samples
a program and 1, 2 or 4 warps, at 65536 x 26 x {64, 16, 128} (tune_dlrm.py's grid cut to those).

    python probe_bwd32.py OUT.json
"""

import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import tune_dlrm  # noqa: E402

tune_dlrm.BLOCK_B = (1, 2)
tune_dlrm.WARPS = (1, 2, 4)
tune_dlrm.SHAPES[torch.float32] = ((65536, 26, 64), (65536, 26, 16), (65536, 26, 128))
tune_dlrm.main(sys.argv[1], torch.float32, "backward")
