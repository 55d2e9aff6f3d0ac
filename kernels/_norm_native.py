"""LayerNorm's, RMSNorm's and dropout-add-norm's calls as native programs (``kernels/_native.py``):
the same kernels, tiles and launches as ``kernels/_norm.py``'s plans, run from C++ with a C++
backward node.

A call signature (x's shape, strides, dtype, device and alignment; each vector's presence,
contiguity and alignment; which inputs need gradients) gets one program, recorded from the
Python plans of ``_norm`` by running their argument lists on slots instead of tensors, so both
paths pass each kernel the same arguments. A signature that ``_norm`` would serve with a copy
(a layout that is not rows, a strided vector) or with nothing to launch gets no program: the
caller takes the Python path.

Per-call scalars: floats ``[eps, weight_offset]`` (LayerNorm's offset is 0); dropout-add-norm's
are floats ``[eps, 0, scale, scale_lo]`` and ints ``[seed, threshold]``.
"""

from __future__ import annotations

import torch

from kernels import _launch, _native, _norm

_PLANS = _launch.plan_table()
_NONE = _native.NOT_SERVED

# The entry points' first step (``_native.Entry``): ``LAYER_NORM.call(x, weight, bias, eps, 0.0)``
# and ``RMS_NORM.call(x, weight, None, eps, weight_offset)`` run a recorded signature's program
# with no Python, or return None. eps >= 0; RMSNorm's offset is 0 without a weight.
LAYER_NORM = _native.Entry(3, floats=((0.0, None), (float("-inf"), None)))
RMS_NORM = _native.Entry(3, floats=((0.0, None), (float("-inf"), 1)))


def call(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float, w_offset: float,
         rms: bool) -> torch.Tensor | None:
    """The norm of x's rows through the native path, or None where it does not serve this call
    (arguments validated by the caller). Records the call's program in the op's entry."""
    if not _native.enabled():
        return None
    grad = torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)
                                        or (bias is not None and bias.requires_grad))
    needs = (x.requires_grad, weight is not None and weight.requires_grad,
             bias is not None and bias.requires_grad) if grad else None
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, _norm._vector_key(weight),
           _norm._vector_key(bias), rms, needs)
    outputs = _native.serve(_PLANS, key, lambda: _program(x, weight, bias, rms, needs),
                            RMS_NORM if rms else LAYER_NORM, (x, weight, bias), [eps, w_offset],
                            graph=needs is not None)
    return None if outputs is None else outputs[0]


def _served(x: torch.Tensor, *vectors: torch.Tensor | None) -> bool:
    return x.numel() > 0 and x.data_ptr() & 15 == 0 and all(
        v is None or (v.is_contiguous() and v.data_ptr() & 15 == 0) for v in vectors)


def _program(x, weight, bias, rms: bool, needs: tuple[bool, bool, bool] | None) -> object:
    if not _served(x, weight, bias):
        return _NONE
    plan = _norm._ForwardPlan(x, weight, bias, None, None, None, rms=rms, store_sum=False, store_mask=False,
                              store_stats=True)
    if plan.copy_x or plan.launch is None:
        return _NONE
    forward = _native.Builder(3, like=(x, weight, bias))
    xs, ws, bs = forward.given
    ws = ws if weight is not None else None
    bs = bs if bias is not None else None
    y = forward.empty(x.shape, x.dtype)
    stats = forward.empty(plan.stats_shape, plan.stats_dtype)
    try:
        forward.launch(plan.launch, *plan._head(xs, xs, ws, bs, None, y, None, None, stats, forward.float_arg(0),
                                                forward.float_arg(1), _norm._NO_DROPOUT))
        if needs is None:
            return _native.program(forward, [y])
        backward, gradients = _backward(x, weight, bias, plan, rms, needs)
    except _native.Unsupported:
        return _NONE
    if backward is None:
        return _NONE
    # dy in y's layout: contiguous, as the backward's kernels were bound for
    return _native.program(forward, [y], saved=[xs, ws if ws is not None else xs, stats], backward=backward,
                           gradients=gradients, grad_layouts=[forward.layout(y)])


def _backward(x, weight, bias, plan: _norm._ForwardPlan, rms: bool, needs: tuple[bool, bool, bool]) -> tuple:
    """The backward's recording, given (x, weight or x, stats, dy), and each input's gradient."""
    need_x, need_w, need_b = needs
    recorded = _record_backward(x, weight, plan, rms, None, outputs=1, has_dsum=False, need_dweight=need_w,
                                need_dbias=need_b and bias is not None, need_dxbias=False)
    if recorded is None:
        return None, None
    record, bplan, ds, _, sums = recorded
    gradients = [ds if need_x else None, (sums, 0) if bplan.need_dweight else None,
                 (sums, int(bplan.need_dweight)) if bplan.need_dbias else None]
    return record, gradients


def _record_backward(src, weight, plan: _norm._ForwardPlan, rms: bool, dropout: _norm.Dropout | None, *,
                     outputs: int, has_dsum: bool, need_dweight: bool, need_dbias: bool, need_dxbias: bool):
    """``_norm._BackwardPlan``'s launches recorded on slots: given (src, weight or src, stats, then
    one gradient per forward output: dy first, dsum second where ``has_dsum``). Returns (record,
    the plan, ds, dx, sums) or None where the plan copies something.

    With ``has_dsum`` the kernel adds dsum into ds; where the prenorm output went unused its
    gradient is zeros (the node makes them), where the Python path runs the variant without dsum:
    the same numbers, but for the sign of a zero (-0 + 0 is +0)."""
    dy = torch.empty_like(src, memory_format=torch.contiguous_format)
    stats = torch.empty(plan.stats_shape, dtype=plan.stats_dtype, device=src.device)
    bplan = _norm._BackwardPlan(src, dy, weight, stats, dy if has_dsum else None, dropout, rms=rms,
                                need_dweight=need_dweight, need_dbias=need_dbias, need_dxbias=need_dxbias)
    if bplan.copy_src or bplan.copy_dy or bplan.copy_dsum or bplan.copy_weight or not bplan.launches:
        return None
    record = _native.Builder(3 + outputs)
    src_s, ws, stats_s, dys = record.given[:4]
    dsum = record.given[4] if has_dsum else dys
    ws = ws if weight is not None else None
    w_offset = record.float_arg(1)
    drop = _dropout_args(record) if dropout is not None else _norm._NO_DROPOUT
    ds = record.empty(src.shape, src.dtype)
    dx = record.empty(src.shape, src.dtype) if bplan.dropout else None
    partials = record.empty(*bplan.partials_shape)
    row_sums = record.empty(*bplan.row_sums_shape) if bplan.sums_given else stats_s
    sums = record.empty((bplan.parts, bplan.n), src.dtype)
    launches = iter(bplan.launches)
    if bplan.sums_given:
        record.launch(next(launches), src_s, dys, src_s if ws is None else ws, stats_s, row_sums, w_offset)
    record.launch(next(launches), *bplan._head(src_s, dys, dsum, ws, stats_s, row_sums, ds, dx, partials, w_offset,
                                               drop))
    if bplan.parts:
        record.launch(next(launches), partials, sums)
    return record, bplan, ds, dx, sums


def _dropout_args(record: _native.Builder) -> _norm.Dropout:
    """Dropout's per-call numbers: ints ``[seed, threshold]``, floats ``[.., .., scale, scale_lo]``."""
    return _norm.Dropout(seed=record.int_arg(0), threshold=record.int_arg(1), scale=record.float_arg(2),
                         scale_lo=record.float_arg(3))


# -- dropout-add-norm --------------------------------------------------------------------------

_DROPOUT_PLANS = _launch.plan_table()


def call_dropout_add(x, residual, bias, weight, norm_bias, dropout: _norm.Dropout, rms: bool, eps: float,
                     prenorm: bool, return_mask: bool) -> list[torch.Tensor] | None:
    """``norm(dropout(x + bias) + residual)``'s outputs (y, then s where ``prenorm``, then the mask
    where ``return_mask``) through the native path, or None where it does not serve the call.
    Per-call numbers: floats ``[eps, 0, scale, scale_lo]``, ints ``[seed, threshold]``."""
    if not _native.enabled():
        return None
    tensors = (x, residual, bias, weight, norm_bias)
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
    needs = tuple(t is not None and t.requires_grad for t in tensors) if grad else None
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, _norm._rows_key(residual),
           _norm._vector_key(bias), _norm._vector_key(weight), _norm._vector_key(norm_bias), _norm._dropout_key(dropout),
           rms, prenorm, return_mask, needs)
    return _native.serve(_DROPOUT_PLANS, key,
                         lambda: _dropout_program(x, residual, bias, weight, norm_bias, dropout, rms, prenorm,
                                                  return_mask, needs),
                         None, tensors, [eps, 0.0, dropout.scale, dropout.scale_lo], [dropout.seed, dropout.threshold],
                         graph=needs is not None)


def _dropout_program(x, residual, bias, weight, norm_bias, dropout, rms, prenorm, return_mask, needs) -> object:
    if not _served(x, bias, weight, norm_bias) or residual.data_ptr() & 15:
        return _NONE
    grad = needs is not None
    plan = _norm._ForwardPlan(x, weight, norm_bias, residual, bias, dropout, rms=rms, store_sum=grad or prenorm,
                              store_mask=return_mask, store_stats=grad)
    if plan.copy_x or plan.copy_residual or plan.copy_vectors or plan.launch is None:
        return _NONE
    forward = _native.Builder(5, like=(x, residual, bias, weight, norm_bias))
    xs, res, bs, ws, nbs = forward.given
    bs, ws, nbs = (slot if t is not None else None for slot, t in ((bs, bias), (ws, weight), (nbs, norm_bias)))
    y = forward.empty(x.shape, x.dtype)
    stats = forward.empty(plan.stats_shape, plan.stats_dtype) if grad else None
    s = forward.empty(x.shape, x.dtype) if plan.store_sum else None
    mask = forward.empty(x.shape, torch.bool) if return_mask else None
    outputs = [y] + ([s] if prenorm else []) + ([mask] if return_mask else [])
    differentiable = [True] + ([True] if prenorm else []) + ([False] if return_mask else [])
    try:
        forward.launch(plan.launch, *plan._head(xs, res, ws, nbs, bs, y, s, mask, stats, forward.float_arg(0),
                                                forward.float_arg(1), _dropout_args(forward)))
        if not grad:
            return _native.program(forward, outputs, differentiable=differentiable)
        need_x, need_res, need_bias, need_w, need_nb = needs
        s_like = torch.empty_like(x, memory_format=torch.contiguous_format)  # the backward reads s, not x
        recorded = _record_backward(s_like, weight, plan, rms, dropout, outputs=len(outputs), has_dsum=prenorm,
                                    need_dweight=need_w, need_dbias=need_nb and norm_bias is not None,
                                    need_dxbias=need_bias and bias is not None)
    except _native.Unsupported:
        return _NONE
    if recorded is None:
        return _NONE
    record, bplan, ds, dx, sums = recorded
    rows = iter(range(bplan.parts))
    dweight = (sums, next(rows)) if bplan.need_dweight else None
    dbias = (sums, next(rows)) if bplan.need_dbias else None
    dxbias = (sums, next(rows)) if bplan.need_dxbias else None
    gradients = [dx if need_x else None, ds if need_res else None, dxbias, dweight, dbias]
    # each output's gradient in the output's own layout (contiguous); the mask's is read by no kernel
    layouts = [forward.layout(y)] + ([forward.layout(s)] if prenorm else []) + ([None] if return_mask else [])
    return _native.program(forward, outputs, differentiable=differentiable, saved=[s, ws if ws is not None else s, stats],
                           backward=record, gradients=gradients, grad_layouts=layouts)
