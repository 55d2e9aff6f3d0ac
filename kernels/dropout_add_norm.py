"""Bias-dropout-residual-add-norm: ``norm(dropout(x + bias, p) + residual)``, LayerNorm or RMSNorm.

The block at the seam of every pre-norm/post-norm transformer layer, fused into one forward pass
and one backward pass (the shared kernels of ``kernels/_norm_kernels.py``):

* Forward: read x, residual (and the bias and norm weights, one row each); build
  ``s = dropout(x + bias) + residual`` in registers, round it to the input dtype, normalise it
  and write the output. ``s`` itself is written too when the caller asks for it (``prenorm=True``,
  the residual stream of a pre-norm model) or when a backward will need it; the keep-mask only
  when asked for (``return_mask=True``).
* Backward: read s and the output gradient (plus the prenorm gradient, if that output was used),
  write the gradient of s (which is the residual's gradient) and of x (the same, times the mask,
  times 1/(1-p)); the bias, weight and norm-bias gradients are reduced from per-row-group partial
  sums in the same pass.

The mask is never stored for the backward: it is regenerated from the seed, with the counter-based
Philox stream of :func:`kernels._norm_stats.keep_mask` (a function of the seed and each element's
position only). The same seed gives the same mask on every call, every layout and in both passes;
a training loop passes a fresh seed per step and layer.

Semantics follow the eager composite ``F.layer_norm(F.dropout(x + bias, p) + residual, ...)``:
dropped elements are ``(x + bias) * 0`` (a NaN or inf there stays NaN, as in torch), kept ones
are scaled by ``1/(1-p)``, p = 0 is the identity and p = 1 drops everything.
"""

from __future__ import annotations

import torch

from kernels import _norm, _norm_native, _norm_ops, _norm_tiling, _ops
from kernels._validate import check_choice, check_same_device, check_same_dtype, check_shape

OP = "dropout_add_norm"
DTYPES = _norm.DTYPES
NORMS = ("layer", "rms")


def block_boundaries() -> tuple[int, ...]:
    """Hidden sizes where the tiling changes on the current backend (for test shapes)."""
    return _norm_tiling.block_boundaries()


class _DropoutAddNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, bias, weight, norm_bias, dropout: _norm.Dropout, rms: bool, eps: float,
                prenorm: bool, return_mask: bool):
        result = _norm.forward(x, weight, norm_bias, eps=eps, rms=rms, residual=residual, xbias=bias,
                               dropout=dropout, store_sum=True, store_mask=return_mask)
        ctx.save_for_backward(result.s, weight, result.stats)
        ctx.dropout, ctx.rms = dropout, rms
        ctx.has_bias, ctx.has_norm_bias, ctx.prenorm = bias is not None, norm_bias is not None, prenorm
        ctx.set_materialize_grads(False)
        outputs = (result.y,) + ((result.s,) if prenorm else ()) + ((result.mask,) if return_mask else ())
        if return_mask:
            ctx.mark_non_differentiable(result.mask)
        return outputs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy, *rest):
        s, weight, stats = ctx.saved_tensors
        dsum = rest[0] if ctx.prenorm else None  # None also when the prenorm output went unused
        if dy is None:  # only the prenorm sum was used
            dy = torch.zeros_like(s)
        dy, dsum = (g.to(s.dtype) if g is not None and g.dtype != s.dtype else g for g in (dy, dsum))
        need_x, need_res, need_bias, need_w, need_nb = ctx.needs_input_grad[:5]
        grads = _norm.backward(
            s, dy, weight, stats, rms=ctx.rms, dsum=dsum, dropout=ctx.dropout,
            need_dweight=need_w, need_dbias=need_nb and ctx.has_norm_bias, need_dxbias=need_bias and ctx.has_bias,
        )
        return (grads.dx if need_x else None, grads.ds if need_res else None, grads.dxbias, grads.dweight,
                grads.dbias, None, None, None, None, None)


@_ops.op(
    "dropout_add_norm",
    "(Tensor x, Tensor residual, Tensor? bias, Tensor? weight, Tensor? norm_bias, float p, SymInt seed, bool rms, "
    "float eps, bool prenorm, bool return_mask, bool save) -> (Tensor, Tensor, Tensor, Tensor)",
)
def dropout_add_norm_op(x, residual, bias, weight, norm_bias, p, seed, rms, eps, prenorm, return_mask, save):
    """The custom op (kernels/_ops.py): y, s, the keep-mask and the row statistics. With ``save``
    (a backward to come) s and the statistics are written, as the eager autograd path writes them;
    without, the eager graph-free forward runs (s only for prenorm=True, no statistics), so that a
    compiled call gives the eager call's bits either way. What is not written, and the mask unless
    asked for, is an empty placeholder (an op returns a fixed number of tensors). The dropout goes
    in as the caller's (p, seed), made a ``Dropout`` here: ``Dropout.of`` rounds its scale with host
    arithmetic on p, which belongs in the op's body, not in traced code. seed is a SymInt so that a compiled call serves
    every seed without recompiling (an int argument is specialised; a float one, p, is anyway)."""
    result = _norm.forward(x, weight, norm_bias, eps=eps, rms=rms, residual=residual, xbias=bias,
                           dropout=_norm.Dropout.of(p, seed), store_sum=save or prenorm, store_mask=return_mask,
                           store_stats=save)
    return (result.y, result.s if save or prenorm else _nothing(x, x.dtype),
            result.mask if return_mask else _nothing(x, torch.bool),
            result.stats if save else _nothing(x, _norm_tiling._stats_dtype(x.dtype)))


def _nothing(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The placeholder of an output not written."""
    return x.new_empty((0,), dtype=dtype)


@dropout_add_norm_op.register_fake
def _(x, residual, bias, weight, norm_bias, p, seed, rms, eps, prenorm, return_mask, save):
    y, s, *mask, stats = _norm_ops.fake_forward(x, store_sum=True, store_mask=return_mask)
    return (y, s if save or prenorm else _nothing(x, x.dtype), mask[0] if return_mask else _nothing(x, torch.bool),
            stats if save else _nothing(x, stats.dtype))


def _setup(ctx, inputs, output):
    _, _, bias, weight, norm_bias, p, seed, rms, _, _, _, save = inputs
    y, s, mask, stats = output
    if not save:  # a call without gradients: nothing saved, nothing to differentiate
        ctx.mark_non_differentiable(y, s)
    ctx.save_for_backward(s, weight, stats)
    ctx.p, ctx.seed, ctx.rms = p, seed, rms
    ctx.has_bias, ctx.has_norm_bias = bias is not None, norm_bias is not None
    ctx.mark_non_differentiable(mask)
    ctx.set_materialize_grads(False)  # an unused output's gradient stays None, as in the eager backward


def _backward(ctx, dy, dsum, _dmask, _dstats):
    s, weight, stats = ctx.saved_tensors
    if dy is None:  # only the prenorm sum was used
        dy = torch.zeros_like(s)
    dy, dsum = (g.to(s.dtype) if g is not None else None for g in (dy, dsum))
    need_x, need_res, need_bias, need_w, need_nb = ctx.needs_input_grad[:5]
    grads = _norm_ops.backward(
        s, dy, weight, stats, rms=ctx.rms, dsum=dsum, p=ctx.p, seed=ctx.seed,
        need_dweight=need_w, need_dbias=need_nb and ctx.has_norm_bias, need_dxbias=need_bias and ctx.has_bias,
    )
    return (grads.dx if need_x else None, grads.ds if need_res else None, grads.dxbias, grads.dweight,
            grads.dbias, None, None, None, None, None, None, None)


dropout_add_norm_op.register_autograd(_backward, setup_context=_setup)


def check_arguments(x, residual, bias=None, weight=None, norm_bias=None, *, p, seed, norm="layer", eps=1e-5):
    """Validate a call (errors name the argument); returns (p, seed, eps) normalised."""
    _norm.check_input(OP, "x", x)
    _norm.check_input(OP, "residual", residual)
    check_same_device(OP, x=x, residual=residual)
    check_same_dtype(OP, x=x, residual=residual)
    check_shape(OP, "residual", residual, x.shape, "the same shape as x")
    _norm.check_row_tensor(OP, "bias", bias, x, "one value per element of x's last dimension")
    _norm.check_row_tensor(OP, "weight", weight, x, "one value per element of x's last dimension")
    _norm.check_row_tensor(OP, "norm_bias", norm_bias, x, "one value per element of x's last dimension")
    check_choice(OP, "norm", norm, NORMS)
    if norm == "rms" and norm_bias is not None:
        raise ValueError(f"{OP}: argument 'norm_bias' must be None for norm='rms' (RMSNorm has no bias)")
    return _norm.check_probability(OP, p), _norm.check_seed(OP, seed), _norm.check_eps(OP, eps)


def dropout_add_norm(
    x: torch.Tensor, residual: torch.Tensor, bias: torch.Tensor | None = None, weight: torch.Tensor | None = None,
    norm_bias: torch.Tensor | None = None, *, p: float, seed: int, norm: str = "layer", eps: float = 1e-5,
    prenorm: bool = False, return_mask: bool = False,
):
    """``norm(dropout(x + bias, p) + residual)`` with norm ``"layer"`` (LayerNorm with weight and
    norm_bias) or ``"rms"`` (RMSNorm with weight).

    x, residual: ``(..., N)``, any strides; bias, weight, norm_bias: ``(N,)`` or None; one dtype
    (float32, float16, bfloat16 with fp32 statistics; float64 with fp64), one device. ``p`` in
    [0, 1]; ``seed`` an int in [0, 2**63): the same seed gives the same mask (pass a new one per
    step). Returns the normalised output; with ``prenorm=True`` also the sum
    ``dropout(x + bias) + residual`` (the residual stream), and with ``return_mask=True`` also the
    bool keep-mask, in that order, as a tuple. Differentiable in every tensor argument.

    Raises TypeError for a non-tensor, an unsupported or mismatched dtype or a non-numeric scalar;
    ValueError for a wrong shape or device, p outside [0, 1], a negative or too large seed, an
    unknown norm, a norm_bias with norm="rms", or a negative or non-finite eps.
    """
    p, seed, eps = check_arguments(x, residual, bias, weight, norm_bias, p=p, seed=seed, norm=norm, eps=eps)
    rms = norm == "rms"
    tensors = (x, residual, bias, weight, norm_bias)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        save = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
        y, s, mask, _ = dropout_add_norm_op(*tensors, p, seed, rms, eps, prenorm, return_mask, save)
        outputs = (y,) + ((s,) if prenorm else ()) + ((mask,) if return_mask else ())
        return outputs[0] if len(outputs) == 1 else outputs
    dropout = _norm.Dropout.of(p, seed)
    outputs = _norm_native.call_dropout_add(x, residual, bias, weight, norm_bias, dropout, rms, eps, prenorm,
                                            return_mask)  # C++ host path (kernels/_native.py)
    if outputs is not None:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        outputs = _DropoutAddNorm.apply(*tensors, dropout, rms, eps, prenorm, return_mask)
    else:  # no graph: skip autograd's overhead and the statistics, and write s only when it is returned
        result = _norm.forward(x, weight, norm_bias, eps=eps, rms=rms, residual=residual, xbias=bias,
                               dropout=dropout, store_sum=prenorm, store_mask=return_mask, store_stats=False)
        outputs = (result.y,) + ((result.s,) if prenorm else ()) + ((result.mask,) if return_mask else ())
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
