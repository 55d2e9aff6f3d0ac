"""Reference for ``kernels.dropout_add_norm.dropout_add_norm``: the eager composite
``norm(F.dropout(x + bias, p) + residual)`` with LayerNorm (``F.layer_norm``) or RMSNorm (its
formula in fp32, ``references.rms_norm.rms_norm_primitive``: see the RMSNorm branch).

Two ways to call it:

* **No mask** (``mask=None``, how benchmarks and models call it): the dropout is torch's own,
  ``F.dropout(x + bias, p, training=True)``, drawing from torch's generator. ``seed`` is accepted
  for signature compatibility and ignored: eager and ``torch.compile`` timings are then those of
  the composite a model would run. With ``return_mask=True`` the mask comes from
  ``torch.native_dropout``, the op behind ``F.dropout``, which also returns it.
* **Mask replay** (``mask=`` a keep-mask, True or 1 = kept, the shape of x): the dropout is
  F.dropout's formula applied to that mask, ``(x + bias) * mask * scale`` with ``scale = 1/(1-p)``
  (0 at p = 1, so a dropped NaN or inf stays NaN as in torch). The harness replays the kernel's
  own mask through here (``harness.random_checks``), in the input dtype for eager and in float64
  for the oracle.

p = 0 without a mask is the deterministic op, exactly: F.dropout's identity, and with
``return_mask`` an all-True mask (not ``torch.native_dropout``'s, which on CUDA can drop at p = 0).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from references.layer_norm import gradient_term_magnitudes as layer_norm_gradient_terms
from references.layer_norm import term_magnitudes as layer_norm_terms
from references.rms_norm import gradient_term_magnitudes as rms_norm_gradient_terms
from references.rms_norm import rms_norm_primitive

NORMS = ("layer", "rms")


def dropout_scale(p: float) -> float:
    """F.dropout's scale of a kept element: 1/(1-p), and 0 when every element is dropped."""
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


def dropout_add_norm(
    x: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None = None, weight: torch.Tensor | None = None,
    norm_bias: torch.Tensor | None = None, *, p: float, seed: int = 0, norm: str = "layer", eps: float = 1e-5,
    prenorm: bool = False, return_mask: bool = False, mask: torch.Tensor | None = None,
):
    """Outputs as the kernel returns them: y, then s = dropout(x + bias) + residual if ``prenorm``,
    then the bool keep-mask if ``return_mask`` (a tuple when more than y)."""
    if norm not in NORMS:
        raise ValueError(f"dropout_add_norm reference: argument 'norm' must be one of {NORMS}, got {norm!r}")
    h = x + bias if bias is not None else x
    if mask is not None:
        keep = mask.to(device=h.device, dtype=torch.bool)
        dropped = h * keep.to(h.dtype) * dropout_scale(p)
    elif return_mask and p == 0:
        # torch.native_dropout on CUDA is not the identity at p = 0: its uniform draw can be exactly
        # 1.0, which it drops (the H100 nightly saw one element in ~1e6 dropped). p = 0 is the
        # deterministic op by definition, mask and all.
        dropped, keep = h, torch.ones_like(h, dtype=torch.bool)
    elif return_mask:
        dropped, keep = torch.native_dropout(h, p, True)
    else:
        dropped, keep = F.dropout(h, p, training=True), None
    s = dropped + residual
    if norm == "layer":
        y = F.layer_norm(s, s.shape[-1:], weight, norm_bias, eps)
    else:
        if norm_bias is not None:
            raise ValueError("dropout_add_norm reference: argument 'norm_bias' must be None for norm='rms'")
        # The formula, not F.rms_norm: on a row holding an infinity (a 16-bit sum that overflowed:
        # fp16 x = -14336 kept at p = 0.9), ATen's CUDA kernel returns the whole row NaN, where its
        # CPU kernel and the formula give 0 at the finite entries (the H100 nightly,
        # results/2026-11-24-h100-7, calls 6 and 7). The truth may not depend on the device.
        y = rms_norm_primitive(s, weight, eps)
    outputs = (y,) + ((s,) if prenorm else ()) + ((keep,) if return_mask else ())
    return outputs[0] if len(outputs) == 1 else outputs


def _normalised_sum(x, residual, bias, p, mask):
    """s = dropout(x + bias) + residual with the given keep-mask (all kept at p = 0), or None
    when p > 0 and no mask is given (the terms depend on the kernel's mask)."""
    h = x + bias if bias is not None else x
    if mask is None:
        return h + residual if p == 0 else None
    return h * mask.to(device=h.device, dtype=h.dtype) * dropout_scale(p) + residual


def term_magnitudes(
    x: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None = None, weight: torch.Tensor | None = None,
    norm_bias: torch.Tensor | None = None, *, p: float, norm: str = "layer", eps: float = 1e-5,
    mask: torch.Tensor | None = None, **_,
) -> tuple:
    """Term magnitudes of y for the LayerNorm form (see ``references.layer_norm.term_magnitudes``),
    at p = 0 or with the kernel's mask replayed (``mask``); None where they are not given: RMSNorm's
    output is a product, not a sum, and with p > 0 and no mask the terms are unknown. s is rounded
    to the input dtype before it is normalised, by eager and by the kernel alike, so these terms
    carry that dtype's ulp (the spec sets no finer precision): an H100 bf16 case, y = 0.0048 from
    terms of ~1, had the kernel 2.5 ulp of y off and eager 0.5."""
    s = _normalised_sum(x, residual, bias, p, mask)
    if norm != "layer" or s is None:
        return (None,)
    return (layer_norm_terms(s, weight, norm_bias, eps),)


def gradient_term_magnitudes(
    x: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None, weight: torch.Tensor | None,
    norm_bias: torch.Tensor | None, grad_outputs, *, p: float, norm: str, eps: float, prenorm: bool,
    mask: torch.Tensor | None = None, **_,
) -> dict[str, torch.Tensor]:
    """Term magnitudes of each gradient: those of the norm of s (``references.layer_norm`` or
    ``references.rms_norm``), whose input gradient reaches residual as is and x through the mask
    and scale; {} where s is unknown."""
    s = _normalised_sum(x, residual, bias, p, mask)
    if s is None:
        return {}
    if norm == "layer":
        terms = layer_norm_gradient_terms(s, weight, norm_bias, eps, grad_outputs[0])
    else:
        terms = rms_norm_gradient_terms(s, weight, eps, 0.0, grad_outputs[0])
    grad_s = terms["x"] + (grad_outputs[1].abs() if prenorm else 0)
    kept = dropout_scale(p) * (mask.to(device=s.device, dtype=s.dtype) if mask is not None else 1.0)
    grad_x = grad_s * kept
    out = {"x": grad_x, "residual": grad_s}
    if "weight" in terms:
        out["weight"] = terms["weight"]
    if "bias" in terms:  # the norm's bias
        out["norm_bias"] = terms["bias"]
    if bias is not None:
        out["bias"] = grad_x.reshape(-1, s.shape[-1]).sum(dim=0)
    return out
