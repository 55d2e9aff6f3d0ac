"""References for ``kernels.glu``: act(a) * b, on two tensors or on the two halves of one.

The activations are the tail-stable forms of ``references/_activations.py`` (the same functions
as ``F.silu`` and ``F.gelu``, without their float64 cancellations; see there).
"""

from __future__ import annotations

import torch

from references._activations import ACTIVATIONS


def glu(a: torch.Tensor, b: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    return ACTIVATIONS[activation](a) * b


def glu_packed(x: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    gate, value = x.chunk(2, dim=-1)
    return ACTIVATIONS[activation](gate) * value
