"""Reference for ``kernels.linear_act.linear_act``: act(x @ weight^T + bias), eager.

``F.linear`` (cuBLAS on a GPU, fp32 accumulation for 16-bit inputs) followed by the activation in
its tail-stable form (``references/_activations.py``). Under ``torch.compile`` this is the peer the
fused kernel must beat: a cuBLAS matmul and a generated epilogue kernel for bias and activation.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from references._activations import ACTIVATIONS
from references._terms import gradient_terms


def linear_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str = "gelu") -> torch.Tensor:
    return ACTIVATIONS[activation](F.linear(x, weight, bias))


def gradient_term_magnitudes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str,
                             grad_outputs) -> dict[str, torch.Tensor]:
    """The sum of |terms| behind each gradient element (``harness.numerics``).

    Every gradient is a matmul of ``grad_z = g * act'(z)``, and grad_z reaches the matmuls
    rounded to the 16-bit dtype from a z that was rounded too: the kernel's z (one rounding of the
    fp32 accumulator) and eager's are each within an ulp of the true z, which moves act'(z) by
    ``act''(z) * dz``. So each grad_z element is worth ``|g| * (|act'(z)| + |z * act''(z)|)`` at
    the dtype's ulp, and a gradient summed from few of them can cancel: on the H100 an fp16 grad x
    of 0.067, summed over 9 outputs from terms of ~1, was 10 ulp off where eager happened to be
    within 1 (kernel error 6.3e-4; eager's largest on the same tensor 4.8e-3).
    """
    (grad,) = grad_outputs
    z = F.linear(x, weight, bias).detach().requires_grad_(True)
    (slope,) = torch.autograd.grad(ACTIVATIONS[activation](z).sum(), z, create_graph=True)
    # relu's slope is piecewise constant: autograd then has no path back to z (None: no curvature)
    (curvature,) = torch.autograd.grad(slope.sum(), z, allow_unused=True) if slope.requires_grad else (None,)
    curvature = torch.zeros_like(z) if curvature is None else curvature
    grad_z_terms = grad.abs() * (slope.detach().abs() + (z.detach() * curvature).abs())
    return gradient_terms(lambda x, weight, bias: F.linear(x, weight, bias), {"x": x, "weight": weight, "bias": bias},
                          grad_z_terms)
