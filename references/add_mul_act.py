"""Reference for ``kernels.add_mul_act.add_mul_act``: act(x + alpha * y + bias)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def gelu_tanh(z: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation, 0.5 z (1 + tanh(u)) with u = sqrt(2/pi) (z + 0.044715 z^3),
    written as the identical z * sigmoid(2u).

    The tanh form cancels: for u below about -19, 1 + tanh(u) rounds to 0 even in float64, so an
    fp64 oracle built on it (or ``F.gelu(approximate="tanh")``) says 0 where the value is ~1e-22
    and flags a kernel that gets it right. The sigmoid form is the same function without the
    cancellation.
    """
    u = math.sqrt(2.0 / math.pi) * (z + 0.044715 * z * z * z)
    return z * torch.sigmoid(2.0 * u)


ACTIVATIONS = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu_tanh": gelu_tanh,
}


def add_mul_act(
    x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float = 1.0, activation: str = "relu"
) -> torch.Tensor:
    return ACTIVATIONS[activation](x + alpha * y + bias)
