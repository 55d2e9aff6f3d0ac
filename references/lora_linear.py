"""Reference for ``kernels.lora_linear.lora_linear``: the eager three-matmul LoRA composition.

``F.linear(x, weight) + scale * F.linear(F.linear(x, lora_a), lora_b)``: what a LoRA layer
computes without fusion (peft's Linear), writing the base and low-rank products at full size.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def lora_linear(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor,
                scale: float = 1.0) -> torch.Tensor:
    return F.linear(x, weight) + scale * F.linear(F.linear(x, lora_a), lora_b)
