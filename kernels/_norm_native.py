"""LayerNorm's and RMSNorm's calls as native programs (``kernels/_native.py``): the same kernels,
tiles and launches as ``kernels/_norm.py``'s plans, run from C++ with a C++ backward node.

A call signature (x's shape, strides, dtype, device and alignment; each vector's presence,
contiguity and alignment; which inputs need gradients) gets one program, recorded from the
Python plans of ``_norm`` by running their argument lists on slots instead of tensors, so both
paths pass each kernel the same arguments. A signature that ``_norm`` would serve with a copy
(a layout that is not rows, a strided vector) or with nothing to launch gets no program: the
caller takes the Python path.

Per-call scalars: floats ``[eps, weight_offset]`` (LayerNorm's offset is 0).
"""

from __future__ import annotations

import torch

from kernels import _launch, _native, _norm

_PLANS = _launch.plan_table()
_NONE = _native.NOT_SERVED


def call(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float, w_offset: float,
         rms: bool) -> torch.Tensor | None:
    """The norm of x's rows through the native path, or None where it does not serve this call
    (arguments validated by the caller)."""
    if not _native.enabled():
        return None
    grad = torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)
                                        or (bias is not None and bias.requires_grad))
    needs = (x.requires_grad, weight is not None and weight.requires_grad,
             bias is not None and bias.requires_grad) if grad else None
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, _norm._vector_key(weight),
           _norm._vector_key(bias), rms, needs)
    program = _PLANS.get(key)
    if program is None:
        program = _launch.remember(_PLANS, key, _program(x, weight, bias, rms, needs))
    if program is _NONE:
        return None
    if needs is None:
        return _native.run(program, [x, weight, bias], [eps, w_offset], [])[0]
    return _native.apply(program, [x, weight, bias], [eps, w_offset], [])[0]


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
    forward = _native.Builder(3)
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
    dy = torch.empty_like(x, memory_format=torch.contiguous_format)
    return _native.program(forward, [y], saved=[xs, ws if ws is not None else xs, stats], backward=backward,
                           gradients=gradients, grad_layouts=[(x.dtype, x.shape, dy.stride())])


def _backward(x, weight, bias, plan: _norm._ForwardPlan, rms: bool, needs: tuple[bool, bool, bool]) -> tuple:
    """The backward's recording, given (x, weight or x, stats, dy), and each input's gradient."""
    need_x, need_w, need_b = needs
    dy = torch.empty_like(x, memory_format=torch.contiguous_format)
    stats = torch.empty(plan.stats_shape, dtype=plan.stats_dtype, device=x.device)
    bplan = _norm._BackwardPlan(x, dy, weight, stats, None, None, rms=rms, need_dweight=need_w,
                                need_dbias=need_b and bias is not None, need_dxbias=False)
    if bplan.copy_src or bplan.copy_dy or bplan.copy_weight or not bplan.launches:
        return None, None
    record = _native.Builder(4)
    xs, ws, stats_s, dys = record.given
    ws = ws if weight is not None else None
    w_offset = record.float_arg(1)
    ds = record.empty(x.shape, x.dtype)
    partials = record.empty(*bplan.partials_shape)
    row_sums = record.empty(*bplan.row_sums_shape) if bplan.sums_given else stats_s
    sums = record.empty((bplan.parts, bplan.n), x.dtype)
    launches = iter(bplan.launches)
    if bplan.sums_given:
        record.launch(next(launches), xs, dys, xs if ws is None else ws, stats_s, row_sums, w_offset)
    record.launch(next(launches), *bplan._head(xs, dys, dys, ws, stats_s, row_sums, ds, None, partials, w_offset,
                                               _norm._NO_DROPOUT))
    if bplan.parts:
        record.launch(next(launches), partials, sums)
    gradients = [ds if need_x else None, (sums, 0) if bplan.need_dweight else None,
                 (sums, int(bplan.need_dweight)) if bplan.need_dbias else None]
    return record, gradients
