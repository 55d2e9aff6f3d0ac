"""Call 12 probe: dlrm_interaction's fp32 backward at one sample a program and 1, 2 or 4 warps, at
dims 16, 64 and 128 (tune_dlrm.py's grid cut to those tiles: call 11's full sweep ran out of time
after dim 64, where 1 warp beat production's 2 by 10%).

    python probe_dlrm_fp32_backward.py OUT.json
"""

import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import tune_dlrm  # noqa: E402

tune_dlrm.BLOCK_B = (1,)
tune_dlrm.WARPS = (1, 2, 4)
tune_dlrm.SHAPES[torch.float32] = ((65536, 26, 128), (65536, 26, 64), (65536, 26, 16))
tune_dlrm.main(sys.argv[1], torch.float32, "backward")
