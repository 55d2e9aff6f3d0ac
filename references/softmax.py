"""Reference for ``kernels.softmax.softmax``: softmax over the last dimension."""

from __future__ import annotations

import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)
