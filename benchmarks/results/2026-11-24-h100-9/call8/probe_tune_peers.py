"""Call 8 probe: tune_dlrm.py's backward with its compiled peer after the donated-buffer fix
(call 2's sweep crashed there), cut to one shape and one tiling.

    python probe_tune_peers.py OUT.json
"""

import os
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import tune_dlrm  # noqa: E402

tune_dlrm.BLOCK_B = (1,)
tune_dlrm.WARPS = (4,)
tune_dlrm.SHAPES[torch.float32] = ((16384, 26, 64),)
tune_dlrm.main(sys.argv[1], torch.float32, "backward")
