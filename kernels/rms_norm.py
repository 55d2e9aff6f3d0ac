"""RMSNorm over the last dimension: Triton forward and backward behind ``torch.autograd.Function``.

``y = x / sqrt(mean(x^2) + eps) * (weight + weight_offset)`` per row; weight optional, and
``weight_offset = 1.0`` gives the ``(1 + weight)`` form (Gemma), whose weight is stored as an offset
from one. The offset is added in fp32 inside the kernel, so an fp16/bf16 weight near 0 keeps its
precision (``1 + weight`` rounded to bf16 first would lose it).

The kernels are the shared norm kernels of ``kernels/_norm_kernels.py``: one forward pass holding a row
in registers with its mean square in fp32, one backward pass whose weight gradient is reduced from
per-row-group partial sums (no second pass over the rows, no atomics). An all-zero row gives
``rstd = 1/sqrt(eps)`` and a zero output, as torch does.
"""

from __future__ import annotations

import torch

from kernels import _native, _norm, _norm_native, _norm_ops, _norm_tiling, _ops
from kernels._validate import check_finite_scalar

OP = "rms_norm"
DTYPES = _norm.DTYPES


def block_boundaries() -> tuple[int, ...]:
    """Hidden sizes where the tiling changes on the current backend (for test shapes)."""
    return _norm_tiling.block_boundaries()


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps: float, weight_offset: float):
        result = _norm.forward(x, weight, None, eps=eps, rms=True, w_offset=weight_offset)
        ctx.save_for_backward(x, weight, result.stats)
        ctx.weight_offset = weight_offset
        return result.y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        x, weight, stats = ctx.saved_tensors
        if dy.dtype != x.dtype:  # autograd may hand a grad of another dtype; never mutate it
            dy = dy.to(x.dtype)
        need_x, need_w = ctx.needs_input_grad[:2]
        grads = _norm.backward(x, dy, weight, stats, rms=True, w_offset=ctx.weight_offset, need_dweight=need_w)
        return (grads.ds if need_x else None), grads.dweight, None, None


@_ops.op("rms_norm", "(Tensor x, Tensor? weight, float eps, float weight_offset) -> (Tensor, Tensor)")
def rms_norm_op(x, weight, eps, weight_offset):
    """The custom op (kernels/_ops.py): y and the row statistics its backward reads."""
    result = _norm.forward(x, weight, None, eps=eps, rms=True, w_offset=weight_offset)
    return result.y, result.stats


@rms_norm_op.register_fake
def _(x, weight, eps, weight_offset):
    return _norm_ops.fake_forward(x)


def _setup(ctx, inputs, output):
    x, weight, _, weight_offset = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.weight_offset = weight_offset


def _backward(ctx, dy, _dstats):
    x, weight, stats = ctx.saved_tensors
    need_x, need_w = ctx.needs_input_grad[:2]
    grads = _norm_ops.backward(x, dy.to(x.dtype), weight, stats, rms=True, w_offset=ctx.weight_offset,
                               need_dweight=need_w)
    return (grads.ds if need_x else None), grads.dweight, None, None


rms_norm_op.register_autograd(_backward, setup_context=_setup)


def check_arguments(x, weight=None, eps=1e-6, weight_offset=0.0) -> tuple[float, float]:
    """Validate a call (errors name the argument); returns (eps, weight_offset) as floats."""
    _norm.check_input(OP, "x", x)
    _norm.check_row_tensor(OP, "weight", weight, x, "one value per element of x's last dimension")
    eps = _norm.check_eps(OP, eps)
    weight_offset = check_finite_scalar(OP, "weight_offset", weight_offset)
    if weight is None and weight_offset != 0.0:
        raise ValueError(f"{OP}: argument 'weight_offset' ({weight_offset}) needs a weight to offset; weight is None")
    return eps, weight_offset


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6, weight_offset: float = 0.0
) -> torch.Tensor:
    """``F.rms_norm(x, x.shape[-1:], weight + weight_offset, eps)`` (``weight=None``: no scaling).

    x: ``(..., N)``, ``ndim >= 1``, any strides; weight: ``(N,)`` or None; one dtype (float32,
    float16, bfloat16 with fp32 statistics; float64 with fp64), one device. ``weight_offset``:
    1.0 for the ``x_normed * (1 + weight)`` form, 0.0 (default) for plain RMSNorm. Returns a new
    contiguous tensor of x's shape and dtype; differentiable in x and weight.

    Raises TypeError for a non-tensor, an unsupported or mismatched dtype or a non-numeric
    scalar; ValueError for a wrong shape or device, a negative or non-finite eps, a non-finite
    weight_offset, or a weight_offset without a weight.
    """
    if not _ops.route():  # a signature seen before, the native path on: its program, run in C++
        y = _norm_native.RMS_NORM.call(x, weight, None, eps, weight_offset)
        if y is not None:
            return y
    eps, weight_offset = check_arguments(x, weight, eps, weight_offset)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return rms_norm_op(x, weight, eps, weight_offset)[0]
    y = _norm_native.call(x, weight, None, eps, weight_offset, rms=True)  # C++ host path (kernels/_native.py)
    if y is not None:
        return y
    if torch.is_grad_enabled() and (x.requires_grad or (weight is not None and weight.requires_grad)):
        return _RMSNorm.apply(x, weight, eps, weight_offset)
    # no graph: skip autograd's overhead; the statistics are stored all the same, as LayerNorm's
    return _norm.forward(x, weight, None, eps=eps, rms=True, w_offset=weight_offset).y
