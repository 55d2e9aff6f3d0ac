"""Reference for ``kernels.linear_act.linear_act``: act(x @ weight^T + bias), eager.

``F.linear`` (cuBLAS on a GPU, fp32 accumulation for 16-bit inputs) followed by the activation in
its tail-stable form (``references/_activations.py``). Under ``torch.compile`` this is the peer the
fused kernel must beat: a cuBLAS matmul and a generated epilogue kernel for bias and activation.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from references._activations import ACTIVATIONS


def linear_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str = "gelu") -> torch.Tensor:
    return ACTIVATIONS[activation](F.linear(x, weight, bias))
