"""Reference for ``kernels.layer_norm.layer_norm``: LayerNorm over the last dimension."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from references._terms import norm_gradient_terms


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def layer_norm_primitive(
    x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """The same op from elementwise ops and reductions (as models often write it), in x's dtype."""
    mean = x.mean(dim=-1, keepdim=True)
    centred = x - mean
    y = centred * torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def term_magnitudes(
    x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """The sum of |terms| behind each output element (``harness.numerics``): the output is
    ``weight * rstd * (x - mean) + bias`` and the mean is itself a sum of ``x_j / n``, so
    ``(|x| + mean(|x|)) * rstd * |weight| + |bias|``.

    Where x sits near its row's mean, or the bias cancels the rest, the result is far below its
    terms, and a kernel that sums and rounds in another order is off by ulps of the terms: several
    ulps of a 16-bit result, while eager's own rounding there may be exact by luck. Two H100 bf16
    cases: -5.2e-6 where x was within 3e-8 of a row mean summed from 1021 values of ~0.8, kernel
    off by 9.3e-8 (2.31x eager's envelope; 0.87 fp32 ulp of these terms); and the bias cancelling
    ``w * x_hat`` to -1.05e-6 from terms of ~1 (2.54x; 0.2 ulp).
    """
    _, terms = _normalised_terms(x, eps)
    if weight is not None:
        terms = terms * weight.abs()
    return terms + bias.abs() if bias is not None else terms


def gradient_term_magnitudes(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float,
                             grad_output: torch.Tensor) -> dict[str, torch.Tensor]:
    """The sum of |terms| behind each gradient element (``references._terms.norm_gradient_terms``),
    for the inputs this call has."""
    rstd, x_hat_terms = _normalised_terms(x, eps)
    terms = norm_gradient_terms(x_hat_terms, rstd, grad_output, weight, centred=True)
    return {name: terms[name] for name, t in (("x", x), ("weight", weight), ("bias", bias)) if t is not None}


def _normalised_terms(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(rstd, the term magnitudes of x_hat = (x - mean) * rstd): ``(|x| + mean(|x|)) * rstd``."""
    mean = x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + eps)
    return rstd, (x.abs() + x.abs().mean(dim=-1, keepdim=True)) * rstd
