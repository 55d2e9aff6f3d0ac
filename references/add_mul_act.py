"""Reference for ``kernels.add_mul_act.add_mul_act``: act(x + alpha * y + bias)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

ACTIVATIONS = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
}


def add_mul_act(
    x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float = 1.0, activation: str = "relu"
) -> torch.Tensor:
    return ACTIVATIONS[activation](x + alpha * y + bias)
