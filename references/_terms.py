"""Term magnitudes (``harness.numerics``) shared by several references.

For an op that is a sum of products of its inputs, evaluating it on the absolute values of its
inputs sums the |terms| behind each output element, and its backward on absolute values with
|grad_output| sums the |terms| behind each gradient element (``gradient_terms``). The norms'
backward is a sum of that kind once the row statistics are fixed (``norm_gradient_terms``).
A leading underscore: not a reference of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch


def fp32_ulps_per_ulp(dtype: torch.dtype) -> float:
    """How many fp32 ulps one ulp of ``dtype`` is: the weight of a term rounded to ``dtype`` in a
    hook whose terms are counted in fp32 ulps (the spec's ``term_precision``)."""
    return torch.finfo(dtype).eps / torch.finfo(torch.float32).eps


def gradient_terms(op: Callable[..., torch.Tensor], wrt: Mapping[str, torch.Tensor], grad_output: torch.Tensor,
                   **fixed) -> dict[str, torch.Tensor]:
    """{name: sum of |terms| of the gradient of ``op`` for that input}, for ``op(**wrt, **fixed)``
    a sum of products of the ``wrt`` tensors (``fixed``: indices, sizes and the like)."""
    leaves = {name: t.detach().abs().requires_grad_(True) for name, t in wrt.items()}
    grads = torch.autograd.grad(op(**leaves, **fixed), tuple(leaves.values()), grad_output.abs())
    return dict(zip(leaves, grads))


def norm_gradient_terms(x_hat_terms: torch.Tensor, rstd: torch.Tensor, grad_output: torch.Tensor,
                        scale: torch.Tensor | None, centred: bool) -> dict[str, torch.Tensor]:
    """Term magnitudes of a LayerNorm's (``centred``) or RMSNorm's gradients over the last dim.

    With x_hat the normalised input, g' = grad_output * scale and n the row length, the input's
    gradient is ``rstd * (g' - mean(g') - x_hat * mean(g' * x_hat))`` (no ``mean(g')`` for
    RMSNorm), the scale's ``sum over rows of grad_output * x_hat`` and the bias's ``sum over rows
    of grad_output``. Each is a cancelling sum: near zero, a kernel that sums in another order than
    eager is off by ulps of these terms, not of the result (an H100 bf16 LayerNorm at 8192 x 4096:
    grad x = -7.8e-8 from terms of ~1, kernel 8e-9 off, scored 13 against eager's envelope there).
    ``x_hat_terms`` are x_hat's own term magnitudes (for LayerNorm, x - mean cancels too).
    Returns {"x", "weight", "bias"}, the caller keeping those its op has.
    """
    g = grad_output.abs()
    gw = g * scale.abs() if scale is not None else g
    inner = gw + x_hat_terms * (gw * x_hat_terms).mean(dim=-1, keepdim=True)
    if centred:
        inner = inner + gw.mean(dim=-1, keepdim=True)
    n = x_hat_terms.shape[-1]
    return {"x": rstd * inner, "weight": (g * x_hat_terms).reshape(-1, n).sum(dim=0),
            "bias": g.reshape(-1, n).sum(dim=0)}
