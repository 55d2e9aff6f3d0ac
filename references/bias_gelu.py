"""Reference for ``kernels.bias_gelu.bias_gelu``: gelu(x + bias), exact or tanh form.

The activations are the tail-stable forms of ``references/_activations.py`` (the same functions
as ``F.gelu``'s two forms, without their cancellation in float64; see there).
"""

from __future__ import annotations

import torch

from references._activations import gelu, gelu_tanh

_GELU = {"none": gelu, "tanh": gelu_tanh}


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return _GELU[approximate](x + bias)
