"""Reference for ``kernels.add_mul_act.add_mul_act``: act(x + alpha * y + bias)."""

from __future__ import annotations

import torch

# The tail-stable activation forms live in references/_activations.py (shared with bias_gelu, glu
# and linear_act); they are re-exported here, where they were first written.
from references._activations import ACTIVATIONS as _ALL_ACTIVATIONS
from references._activations import gelu_tanh, sigmoid, silu

ACTIVATIONS = {name: _ALL_ACTIVATIONS[name] for name in ("relu", "sigmoid", "silu", "gelu_tanh")}

__all__ = ["ACTIVATIONS", "add_mul_act", "gelu_tanh", "sigmoid", "silu"]


def add_mul_act(
    x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float = 1.0, activation: str = "relu"
) -> torch.Tensor:
    return ACTIVATIONS[activation](x + alpha * y + bias)
