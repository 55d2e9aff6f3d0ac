"""Reference for ``kernels.add_mul_act.add_mul_act``: act(x + alpha * y + bias)."""

from __future__ import annotations

import math

import torch


def sigmoid(z: torch.Tensor) -> torch.Tensor:
    """The logistic function, written from exp(-|z|).

    The same values as ``torch.sigmoid``, but its autograd derivative, e / (1 + e)^2, keeps full
    precision in the tails; ``torch.sigmoid``'s backward, y (1 - y), is exactly 0 in float64 once
    y rounds to 1 (z > 37), which would make the fp64 oracle's gradient wrong there.
    """
    e = torch.exp(-z.abs())
    return torch.where(z >= 0, 1 / (1 + e), e / (1 + e))


def gelu_tanh(z: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation, 0.5 z (1 + tanh(u)) with u = sqrt(2/pi) (z + 0.044715 z^3),
    written as the identical z * sigmoid(2u).

    The tanh form cancels: for u below about -19, 1 + tanh(u) rounds to 0 even in float64, so an
    fp64 oracle built on it (or ``F.gelu(approximate="tanh")``) says 0 where the value is ~1e-22
    and flags a kernel that gets it right. The sigmoid form is the same function without the
    cancellation.
    """
    u = math.sqrt(2.0 / math.pi) * (z + 0.044715 * z * z * z)
    return z * sigmoid(2.0 * u)


ACTIVATIONS = {
    "relu": torch.relu,
    "sigmoid": sigmoid,
    "silu": lambda z: z * sigmoid(z),
    "gelu_tanh": gelu_tanh,
}


def add_mul_act(
    x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float = 1.0, activation: str = "relu"
) -> torch.Tensor:
    return ACTIVATIONS[activation](x + alpha * y + bias)
