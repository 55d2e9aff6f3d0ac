"""Reference for ``kernels.linear_act.linear_act``: act(x @ weight^T + bias), eager.

``F.linear`` (cuBLAS on a GPU, fp32 accumulation for 16-bit inputs) followed by the activation in
its tail-stable form (``references/_activations.py``). Under ``torch.compile`` this is the peer the
fused kernel must beat: a cuBLAS matmul and a generated epilogue kernel for bias and activation.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from references._activations import ACTIVATIONS
from references._terms import fp32_ulps_per_ulp, gradient_terms


def linear_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str = "gelu") -> torch.Tensor:
    return ACTIVATIONS[activation](F.linear(x, weight, bias))


def _slope_bound(z: torch.Tensor, activation: str) -> torch.Tensor:
    """How much an error in z can move act(z): |act'(z)|, and 1 for relu (whose slope jumps at 0:
    a z that rounds across 0 moves the output by up to the error itself)."""
    if activation == "relu":
        return torch.ones_like(z)
    with torch.enable_grad():  # the harness calls term hooks under no_grad
        z = z.detach().requires_grad_(True)
        (slope,) = torch.autograd.grad(ACTIVATIONS[activation](z).sum(), z)
    return slope.abs()


def term_magnitudes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str) -> torch.Tensor:
    """The sum of |terms| behind each output element (``harness.numerics``), in fp32 ulps (the
    spec's ``term_precision``): z sums in_features exact products in fp32, whose rounding is an ulp
    of ``|x| @ |weight|^T + |bias|`` however small z is, and the activation passes it on scaled by
    its slope. The H100 nightly run found it: bf16, relu, x "large" against a "small" weight,
    z = 8.24e-6 summed from terms of 5.7; the kernel was 1.3e-7 off (a fiftieth of an fp32 ulp of
    the terms) where eager, summing in another order, happened to be 1.5e-8 off: 2.08x eager's
    envelope."""
    z = F.linear(x, weight, bias)
    return _slope_bound(z, activation) * F.linear(x.abs(), weight.abs(), bias.abs())


def gradient_term_magnitudes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str,
                             grad_outputs, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The sum of |terms| behind each gradient element (``harness.numerics``), in fp32 ulps (the
    spec's ``term_precision``) from ulps of ``dtype`` (grad_z's rounding, below).

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
    ratio = fp32_ulps_per_ulp(dtype)
    grad_z_terms = grad.abs() * (slope.detach().abs() + (z.detach() * curvature).abs()) * ratio
    return gradient_terms(lambda x, weight, bias: F.linear(x, weight, bias), {"x": x, "weight": weight, "bias": bias},
                          grad_z_terms)
