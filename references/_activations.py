"""Activations in tail-stable forms, shared by the references (add_mul_act, bias_gelu, glu,
linear_act).

A reference is the truth twice over: run in float64 it is the oracle, and its autograd gives the
oracle's gradients. Both must stay accurate where the textbook formula cancels or overflows, or a
correct kernel fails (and a wrong one can pass). Each function below is the same mathematical
function as its torch counterpart, written so that float64 keeps full relative precision in the
tails, and so that its autograd derivative does too (``tests/unit/test_references.py`` checks
values and slopes against closed forms).
"""

from __future__ import annotations

import math

import torch

_NEG_SQRT1_2 = -math.sqrt(0.5)


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


def silu(z: torch.Tensor) -> torch.Tensor:
    """z * sigmoid(z) with the tail-stable sigmoid above."""
    return z * sigmoid(z)


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


def gelu(z: torch.Tensor) -> torch.Tensor:
    """Exact GELU, z Phi(z), written as 0.5 z erfc(-z / sqrt(2)).

    ``F.gelu``'s form 0.5 z (1 + erf(z / sqrt(2))) cancels for negative z: in float64 it has lost
    half its digits at z = -6 and is 0 below z = -8.3, where the value is ~1e-16 and beyond, so an
    oracle built on it would be wrong in the tail (and fp32 eager loses everything past z = -5.5).
    erfc keeps full relative precision there, and so does its derivative,
    -2/sqrt(pi) exp(-t^2). The argument is written ``z * -M_SQRT1_2`` so that eager rounds it as
    the kernels do (one fp32 multiply by the fp32 constant).
    """
    return 0.5 * z * torch.erfc(z * _NEG_SQRT1_2)


ACTIVATIONS = {
    "relu": torch.relu,
    "sigmoid": sigmoid,
    "silu": silu,
    "gelu_tanh": gelu_tanh,
    "gelu": gelu,
}
