"""Reference for ``kernels.dropout_add_norm.dropout_add_norm``: the eager composite
``norm(F.dropout(x + bias, p) + residual)`` with LayerNorm or RMSNorm.

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

p = 0 without a mask is F.dropout's identity: the deterministic op, exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from references.layer_norm import term_magnitudes as layer_norm_terms

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
        y = F.rms_norm(s, s.shape[-1:], weight, eps)
    outputs = (y,) + ((s,) if prenorm else ()) + ((keep,) if return_mask else ())
    return outputs[0] if len(outputs) == 1 else outputs


def term_magnitudes(
    x: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None = None, weight: torch.Tensor | None = None,
    norm_bias: torch.Tensor | None = None, *, p: float, norm: str = "layer", eps: float = 1e-5, **_,
) -> tuple:
    """Term magnitudes of y for the LayerNorm form without dropout (see
    ``references.layer_norm.term_magnitudes``); None where they are not given: RMSNorm's output is
    a product, not a sum, and with p > 0 the terms depend on the kernel's mask, which this hook
    does not see. s is rounded to the input dtype before it is normalised, by eager and by the
    kernel alike, so these terms carry that dtype's ulp (the spec sets no finer precision): an
    H100 bf16 case, y = 0.0048 from terms of ~1, had the kernel 2.5 ulp of y off and eager 0.5."""
    if norm != "layer" or p != 0:
        return (None,)
    s = (x + bias if bias is not None else x) + residual
    return (layer_norm_terms(s, weight, norm_bias, eps),)
