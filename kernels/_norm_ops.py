"""What the norms' custom ops share (``kernels/_ops.py`` says why they exist): the shapes of the
shared forward's outputs for their fake implementations, and one backward op for LayerNorm,
RMSNorm and dropout-add-norm, since they share one backward kernel (``kernels/_norm.py``).
"""

from __future__ import annotations

import torch

from kernels import _norm, _ops


def fake_forward(x: torch.Tensor, *, store_sum: bool = False, store_mask: bool = False) -> tuple[torch.Tensor, ...]:
    """y, then s and the keep-mask where stored, then the row statistics: the shapes, dtypes and
    layouts ``_norm.forward`` returns for x (contiguous outputs; fp32 statistics, three per row,
    for 16-bit and fp32 inputs, fp64 for fp64)."""
    out = [_ops.empty_like(x)]
    if store_sum:
        out.append(_ops.empty_like(x))
    if store_mask:
        out.append(_ops.empty_like(x, torch.bool))
    out.append(x.new_empty((3, _ops.rows(x)), dtype=_norm._stats_dtype(x.dtype)))
    return tuple(out)


@_ops.op(
    "norm_backward",
    "(Tensor src, Tensor dy, Tensor? weight, Tensor stats, Tensor? dsum, bool rms, float w_offset, bool dropout, "
    "float p, SymInt seed, bool need_dweight, bool need_dbias, bool need_dxbias) -> Tensor[]",
)
def norm_backward(src, dy, weight, stats, dsum, rms, w_offset, dropout, p, seed, need_dweight, need_dbias,
                  need_dxbias):
    """``_norm.backward`` as an op: [ds, dx (with dropout only), the column sums (parts, N)]. The
    dropout travels as the caller's (p, seed) and becomes a ``_norm.Dropout`` here, as in the
    forward's op: ``Dropout.of`` rounds its scale with host arithmetic on p, which belongs in the
    op's body rather than in an autograd formula traced with fake tensors (seed: a SymInt, as
    there)."""
    drop = _norm.Dropout.of(p, seed) if dropout else None
    g = _norm.backward(src, dy, weight, stats, rms=rms, w_offset=w_offset, dsum=dsum, dropout=drop,
                       need_dweight=need_dweight, need_dbias=need_dbias, need_dxbias=need_dxbias)
    return [g.ds] + ([g.dx] if dropout else []) + [g.sums]


@norm_backward.register_fake
def _(src, dy, weight, stats, dsum, rms, w_offset, dropout, p, seed, need_dweight, need_dbias, need_dxbias):
    parts = int(need_dweight and weight is not None) + int(need_dbias) + int(need_dxbias and dropout)
    sums = src.new_empty((parts, src.shape[-1]))
    return [_ops.empty_like(src)] + ([_ops.empty_like(src)] if dropout else []) + [sums]


def backward(src, dy, weight, stats, *, rms: bool, w_offset: float = 0.0, dsum=None, p: float | None = None,
             seed: int = 0, need_dweight: bool = False, need_dbias: bool = False,
             need_dxbias: bool = False) -> _norm.Backward:
    """``_norm.backward``'s arguments and result, through the op (for the ops' autograd formulas);
    the dropout, if any, as its ``p`` and ``seed`` (``p=None``: none)."""
    has_dropout = p is not None
    need_dweight = need_dweight and weight is not None
    need_dxbias = need_dxbias and has_dropout
    out = norm_backward(src, dy, weight, stats, dsum, rms, w_offset, has_dropout, 0.0 if p is None else p, seed,
                        need_dweight, need_dbias, need_dxbias)
    ds, dx, sums = out[0], (out[1] if has_dropout else None), out[-1]
    dweight, dbias, dxbias = _ops.unpack(sums.unbind(0), (need_dweight, need_dbias, need_dxbias))
    return _norm.Backward(ds, dx, dweight, dbias, dxbias, sums)
