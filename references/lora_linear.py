"""Reference for ``kernels.lora_linear.lora_linear``: the eager three-matmul LoRA composition.

``F.linear(x, weight) + scale * F.linear(F.linear(x, lora_a), lora_b)``: what a LoRA layer
computes without fusion (peft's Linear), writing the base and low-rank products at full size.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from references._terms import fp32_ulps_per_ulp, gradient_terms


def lora_linear(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor,
                scale: float = 1.0) -> torch.Tensor:
    return F.linear(x, weight) + scale * F.linear(F.linear(x, lora_a), lora_b)


def term_magnitudes(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor,
                    scale: float, dtype: torch.dtype) -> torch.Tensor:
    """The sum of |terms| behind each output element (``harness.numerics``), in fp32 ulps (the
    spec's ``term_precision``): the op is a sum of products of its inputs, so its terms are the op
    itself at their absolute values. Each output element sums in_features exact products (and the
    scaled low-rank ones) in fp32, and where that sum cancels, any two orders of adding differ by
    ulps of these terms, not of the result. The H100 nightly run found it: bf16, x "small", scale 0,
    an output of 1.553e-7 summed from terms of 0.162 (fp32's eps times them: 1.9e-8); the kernel
    was 3.9e-9 off where cuBLAS, adding in another order, happened to be 2e-10 off: 3.24x eager's
    envelope, which had no other room (eager within an ulp on the whole row).

    Two precisions meet here, as in the gradient hook below. Eager rounds the scaled low-rank
    product ``scale * xa @ lora_b^T`` to ``dtype`` (twice: the product, then the scaling) before it
    adds the base product; the kernel adds both in one fp32 accumulator. Where the sum cancels, the
    two differ by up to an ulp of ``dtype`` of that product, whatever eager's luck elsewhere in the
    row. (``xa`` itself is rounded alike: on the H100 the kernel's and eager's were bitwise equal at
    the case below.) The H100 and H200 nightly runs found it: bf16, in_features 3, an output of
    -7.3e-6; kernel -9.7e-6, eager -7.6e-6, 4.51 times an envelope of fp32 ulps of the terms.
    """
    s = abs(scale)
    ratio = fp32_ulps_per_ulp(dtype)
    low_rank = F.linear(F.linear(x, lora_a), lora_b).abs() * (s * ratio)
    return lora_linear(x.abs(), weight.abs(), lora_a.abs(), lora_b.abs(), s) + low_rank


def gradient_term_magnitudes(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor,
                             scale: float, grad_outputs, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The sum of |terms| behind each gradient element (``harness.numerics``), in fp32 ulps (the
    spec's ``term_precision``).

    Two precisions meet here. The products are exact and summed in fp32: an fp32 ulp of the op's
    gradients at the absolute values (``gradient_terms``). But grad x's low-rank path goes through
    ``g @ lora_b`` rounded to ``dtype`` (in eager and in the kernel alike): an ulp of ``dtype`` of
    that product's value, carried through the short (rank-long) sum with ``lora_a``. On the H100 a
    bf16 grad x of 9.5e-7 (terms of 0.04, a broadcast lora_b) was 11 ulp off where eager happened
    to be within 1 (kernel 1.036e-6, eager 9.537e-7, oracle 9.511e-7); this gives it 9e-7 of room.
    The adapters' gradients make the same kind of rounding, but sum it over every row, where the
    worst case (the rounding errors all of one sign) overstates the error some sqrt(rows) times;
    there eager's own error, which the envelope is calibrated on, already covers it.
    """
    (grad,) = grad_outputs
    s = abs(scale)
    terms = gradient_terms(lora_linear, {"x": x, "lora_a": lora_a, "lora_b": lora_b}, grad,
                           weight=weight.abs(), scale=s)
    ratio = fp32_ulps_per_ulp(dtype)
    terms["x"] = terms["x"] + ((grad @ lora_b).abs() @ lora_a.abs()) * (s * ratio)
    return terms
