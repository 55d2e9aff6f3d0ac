"""LayerNorm over the last dimension: Triton forward and backward behind ``torch.autograd.Function``.

``y = (x - mean) / sqrt(var + eps) * weight + bias`` per row, weight and bias optional, any hidden
size. The kernels are the shared norm kernels of ``kernels/_norm_kernels.py`` (one forward pass holding a
row in registers, fp32 statistics shifted by the row's first element, one backward pass with
weight/bias gradients reduced from per-row-group partial sums, no atomics); this module holds the
op's contract and its autograd wiring.

The forward saves x (the caller's tensor, not a copy), the weight and three fp32 numbers per row
(shift, centred mean, 1/std); the backward recomputes xhat from them.
"""

from __future__ import annotations

import torch

from kernels import _native, _norm, _norm_native, _norm_ops, _norm_tiling, _ops

OP = "layer_norm"
DTYPES = _norm.DTYPES


def block_boundaries() -> tuple[int, ...]:
    """Hidden sizes where the tiling changes on the current backend (for test shapes)."""
    return _norm_tiling.block_boundaries()


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps: float):
        result = _norm.forward(x, weight, bias, eps=eps, rms=False)
        ctx.save_for_backward(x, weight, result.stats)
        ctx.has_bias = bias is not None
        return result.y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        x, weight, stats = ctx.saved_tensors
        if dy.dtype != x.dtype:  # autograd may hand a grad of another dtype; never mutate it
            dy = dy.to(x.dtype)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        grads = _norm.backward(x, dy, weight, stats, rms=False, need_dweight=need_w, need_dbias=need_b and ctx.has_bias)
        return (grads.ds if need_x else None), grads.dweight, grads.dbias, None


@_ops.op("layer_norm", "(Tensor x, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor)")
def layer_norm_op(x, weight, bias, eps):
    """The custom op (kernels/_ops.py): y and the row statistics its backward reads."""
    result = _norm.forward(x, weight, bias, eps=eps, rms=False)
    return result.y, result.stats


@layer_norm_op.register_fake
def _(x, weight, bias, eps):
    return _norm_ops.fake_forward(x)


def _setup(ctx, inputs, output):
    x, weight, bias, _ = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.has_bias = bias is not None


def _backward(ctx, dy, _dstats):
    x, weight, stats = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    grads = _norm_ops.backward(x, dy.to(x.dtype), weight, stats, rms=False, need_dweight=need_w,
                               need_dbias=need_b and ctx.has_bias)
    return (grads.ds if need_x else None), grads.dweight, grads.dbias, None


layer_norm_op.register_autograd(_backward, setup_context=_setup)


def check_arguments(x, weight=None, bias=None, eps=1e-5) -> float:
    """Validate a call (errors name the argument); returns eps as a float."""
    _norm.check_input(OP, "x", x)
    _norm.check_row_tensor(OP, "weight", weight, x, "one value per element of x's last dimension")
    _norm.check_row_tensor(OP, "bias", bias, x, "one value per element of x's last dimension")
    return _norm.check_eps(OP, eps)


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None, eps: float = 1e-5
) -> torch.Tensor:
    """``F.layer_norm(x, x.shape[-1:], weight, bias, eps)``.

    x: ``(..., N)``, ``ndim >= 1``, any strides; weight, bias: ``(N,)`` or None; one dtype for all
    (float32, float16, bfloat16 with fp32 statistics; float64 with fp64), one device. Returns a
    new contiguous tensor of x's shape and dtype; differentiable in x, weight and bias.

    Raises TypeError for a non-tensor, an unsupported or mismatched dtype or a non-numeric eps;
    ValueError for a wrong shape or device, or an eps that is negative or not finite.
    """
    if not _ops.route():  # a signature seen before, the native path on: its program, run in C++
        y = _norm_native.LAYER_NORM.call(x, weight, bias, eps, 0.0)
        if y is not None:
            return y
    eps = check_arguments(x, weight, bias, eps)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return layer_norm_op(x, weight, bias, eps)[0]
    y = _norm_native.call(x, weight, bias, eps, 0.0, rms=False)  # C++ host path (kernels/_native.py)
    if y is not None:
        return y
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias)):
        return _LayerNorm.apply(x, weight, bias, eps)
    # no graph: skip autograd's overhead. The statistics are stored all the same: skipping them makes
    # the 65536 x 256 forward slower, not faster (docs/design-notes.md).
    return _norm.forward(x, weight, bias, eps=eps, rms=False).y
