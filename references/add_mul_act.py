"""Reference for ``kernels.add_mul_act.add_mul_act``: act(x + alpha * y + bias)."""

from __future__ import annotations

import math

import torch


def sigmoid(z: torch.Tensor) -> torch.Tensor:
    """The logistic function, evaluated on the branch where exp cannot overflow.

    The same values as ``torch.sigmoid``, but its autograd derivative keeps full precision in the
    tails: ``torch.sigmoid``'s backward, y (1 - y), is exactly 0 in float64 once y rounds to 1
    (z > 37), which would make the fp64 oracle's gradient wrong there. Each branch gets only the
    arguments it is meant for (0 elsewhere), so the branch ``torch.where`` drops can neither
    overflow nor send a 0 * inf = NaN into the gradient. (An earlier form, built on exp(-|z|),
    had the right values but a zero derivative at z = 0, where d|z|/dz is taken as 0: the fp64
    oracle said 0 where the true slope is 1/4. A GPU nightly run caught it as a kernel failure.)
    """
    positive = z >= 0
    zero = torch.zeros_like(z)
    z_pos = torch.where(positive, z, zero)
    e_neg = torch.exp(torch.where(positive, zero, z))
    return torch.where(positive, 1 / (1 + torch.exp(-z_pos)), e_neg / (1 + e_neg))


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
