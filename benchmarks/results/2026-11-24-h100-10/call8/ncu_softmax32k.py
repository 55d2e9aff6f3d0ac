"""Call 8: what holds softmax's fp32 forward at 4096 x 32768 to 88.7% of copy bandwidth: one launch
each of production's forward, torch.compile's and a same-size copy, for ncu (launched by call8.sh
with sections SpeedOfLight, WarpStateStats, MemoryWorkloadAnalysis, Occupancy, SchedulerStats)."""
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")))
import kernels.softmax as softmax  # noqa: E402

x = torch.randn(4096, 32768, device="cuda")
compiled = torch.compile(lambda t: torch.softmax(t, dim=-1))
for _ in range(2):  # compile and warm outside the profiled launches (ncu skips the first ones)
    softmax._forward(x)
    compiled(x)
    x.clone()
torch.cuda.synchronize()
softmax._forward(x)
compiled(x)
x.clone()
torch.cuda.synchronize()
