"""Reference for ``kernels.rms_norm.rms_norm``: RMSNorm over the last dimension."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from references._terms import norm_gradient_terms


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6, weight_offset: float = 0.0
) -> torch.Tensor:
    """``F.rms_norm`` with the scale ``weight + weight_offset`` (computed in the weight's dtype, as
    eager code writes ``1 + weight``)."""
    scale = weight + weight_offset if weight is not None and weight_offset != 0.0 else weight
    return F.rms_norm(x, x.shape[-1:], scale, eps)


def rms_norm_primitive(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6, weight_offset: float = 0.0
) -> torch.Tensor:
    """The same op from elementwise ops and a reduction, computed in fp32 for 16-bit inputs as
    LLaMA- and Gemma-style modules write it."""
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * (weight.to(y.dtype) + weight_offset)
    return y.to(x.dtype)


def gradient_term_magnitudes(x: torch.Tensor, weight: torch.Tensor | None, eps: float, weight_offset: float,
                             grad_output: torch.Tensor) -> dict[str, torch.Tensor]:
    """The sum of |terms| behind each gradient element (``references._terms.norm_gradient_terms``),
    the scale being ``weight + weight_offset``."""
    rstd = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    scale = weight + weight_offset if weight is not None else None
    terms = norm_gradient_terms(x.abs() * rstd, rstd, grad_output, scale, centred=False)
    return {"x": terms["x"], **({"weight": terms["weight"]} if weight is not None else {})}
