"""``act(x + alpha * y + bias)``: one Triton pass forward, one Triton pass backward.

x and y have shape ``(..., N)``, bias has shape ``(N,)`` and is broadcast over the rows. The forward
reads x, y and bias once and writes the output once; nothing intermediate touches memory.

The backward recomputes ``z = x + alpha * y + bias`` from the saved inputs (saving the output would
not give z back for every activation, and saving z would cost a full extra write in the forward) and
writes ``grad_x = grad * act'(z)`` and ``grad_y = alpha * grad_x`` in the same pass. ``grad_bias``,
the sum of grad_x over rows, is reduced without a second pass and without atomics: each program
walks a fixed group of rows for one column block, keeps a running sum in registers and writes one
partial row; a small ``torch.sum`` over those partials (one per row group) finishes it. The
grouping depends only on the shape, so results are bitwise reproducible. The running sums and the
partials are fp64 (cheap: one add per element, and the partials are tiny), so the reduction adds
no error of its own, whatever order the rows are added in: grad_bias is rounded once, at the end.

Arithmetic in the compute dtype of ``kernels/_rows.py``'s tiles (fp32; fp64 for fp32 results,
so that z is exact), results stored in the input dtype. The activations and their derivatives are
the shared, interpreter-safe forms of ``kernels/_activations.py`` (gelu's tanh form written through
the sigmoid, the sigmoid from ``exp(-|z|)``); ``kernels/cuda/add_mul_act.py`` is the same op as a
CUDA C++ extension.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _activations, _launch, _ops, _rows
from kernels._validate import (
    check_choice,
    check_finite_scalar,
    check_same_device,
    check_same_dtype,
    check_shape,
    check_tensor,
)

OP = "add_mul_act"
ACTIVATIONS = ("relu", "sigmoid", "silu", "gelu_tanh")


def block_boundaries() -> tuple[int, ...]:
    """Row lengths (N) where this kernel's tiling changes on the current backend (for test shapes)."""
    return _rows.elementwise_block_boundaries()


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def _load_z(x_ptr, y_ptr, b_ptr, rows, cols, mask, n_cols, alpha,
            x_inner, x_so, x_si, y_inner, y_so, y_si, PRECISE: tl.constexpr):
    """z = x + alpha * y + bias for a [ROWS, BLOCK] tile (0 where masked), in the compute dtype."""
    x = _rows.load_tile(x_ptr, rows, cols, mask, x_inner, x_so, x_si, PRECISE)
    y = _rows.load_tile(y_ptr, rows, cols, mask, y_inner, y_so, y_si, PRECISE)
    return x + alpha * y + _rows.load_vector(b_ptr, cols, n_cols, PRECISE)[None, :]


@_launch.jit
def _add_mul_act_fwd_kernel(
    x_ptr, y_ptr, b_ptr, out_ptr, alpha, n_rows, n_cols,
    x_inner, x_so, x_si, y_inner, y_so, y_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
):
    rows, cols, mask = _rows.tile(ROWS, BLOCK, n_rows, n_cols)
    z = _load_z(x_ptr, y_ptr, b_ptr, rows, cols, mask, n_cols, alpha,
                x_inner, x_so, x_si, y_inner, y_so, y_si, PRECISE)
    out = _activations.activate(z, ACT, PRECISE)
    tl.store(out_ptr + _rows.dense_offsets(rows, cols, n_cols), _rows.cast_for_store(out, out_ptr), mask=mask)


@_launch.jit(do_not_specialize=["tiles_per_group"])
def _add_mul_act_bwd_kernel(
    x_ptr, y_ptr, b_ptr, g_ptr, gx_ptr, gy_ptr, partial_ptr, alpha, n_rows, n_cols, tiles_per_group,
    x_inner, x_so, x_si, y_inner, y_so, y_si, g_inner, g_so, g_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
):
    # Program (column block c, row group r): rows [r * tiles_per_group * ROWS, ...) in tiles of
    # ROWS; grad_bias's partial sum for this group stays in registers until the end.
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    group = tl.program_id(1)
    acc = tl.zeros([ROWS, BLOCK], tl.float64)
    for t in range(0, tiles_per_group):
        rows = (group * tiles_per_group + t) * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        z = _load_z(x_ptr, y_ptr, b_ptr, rows, cols, mask, n_cols, alpha,
                    x_inner, x_so, x_si, y_inner, y_so, y_si, PRECISE)
        g = _rows.load_tile(g_ptr, rows, cols, mask, g_inner, g_so, g_si, PRECISE)
        dz = tl.where(mask, g * _activations.activation_slope(z, ACT, PRECISE), 0.0)
        dense = _rows.dense_offsets(rows, cols, n_cols)
        tl.store(gx_ptr + dense, _rows.cast_for_store(dz, gx_ptr), mask=mask)
        tl.store(gy_ptr + dense, _rows.cast_for_store(alpha * dz, gy_ptr), mask=mask)
        acc += dz.to(tl.float64)
    tl.store(partial_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


# A call's host work is a dictionary lookup: a plan per call signature (layouts, dtype, device,
# alignment, activation) holds the launcher bound to its grid and fixed arguments
# (_launch.Kernel.bind), and the backward's row grouping.
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()


def _key(x, y, bias, activation: str) -> tuple:
    return (x.shape, x.stride(), y.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, y.data_ptr() & 15 == 0,
            bias.is_contiguous(), bias.data_ptr() & 15 == 0, activation)


def _forward(x, y, bias, alpha: float, activation: str) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    key = _key(x, y, bias, activation)
    plan = _FORWARD_PLANS.get(key) or _launch.remember(_FORWARD_PLANS, key, _forward_plan(x, y, bias, out, activation))
    plan(x, y, bias, out, alpha)
    return out


def _forward_plan(x, y, bias, out, activation: str):
    if out.numel() == 0:
        return _rows.nothing
    xl, yl = _rows.row_layout(x), _rows.row_layout(y)
    tile = _rows.elementwise_tile(xl.n, x.dtype)
    launch = _add_mul_act_fwd_kernel.bind(
        _rows.tile_grid(xl.rows, tile),
        (xl.tensor, yl.tensor, bias.contiguous(), out, 1.0, xl.rows, xl.n, *xl.kernel_args(), *yl.kernel_args()),
        dict(BLOCK=tile.block, ROWS=tile.rows, ACT=activation, PRECISE=x.dtype == torch.float32,
             num_warps=tile.num_warps),
        runtime=5)
    return _rows.copying(launch, (xl.copied, yl.copied, not bias.is_contiguous()))


def _backward(x, y, bias, alpha: float, activation: str, grad: torch.Tensor):
    """(grad_x, grad_y, grad_bias partial sums: fp64, one row per row group).

    grad_bias is ``partials.sum(0)`` cast to the input dtype; kept separate so the reduction step
    is visible (and testable) on its own.
    """
    key = (_key(x, y, bias, activation), grad.stride(), grad.data_ptr() & 15 == 0)
    plan = _BACKWARD_PLANS.get(key) or _launch.remember(_BACKWARD_PLANS, key, _BackwardPlan(x, y, bias, activation, grad))
    return plan(x, y, bias, grad, alpha)


class _BackwardPlan:
    """A backward call signature's row grouping and bound launcher."""

    def __init__(self, x, y, bias, activation: str, grad):
        n = x.shape[-1]
        self.launch = None
        self.partials_shape = (1, n)
        if x.numel() == 0:
            return
        xl, yl, gl = _rows.row_layout(x), _rows.row_layout(y), _rows.row_layout(grad)
        tile = _rows.elementwise_tile(n, x.dtype, backward=True)
        row_tiles = triton.cdiv(xl.rows, tile.rows)
        copy_bias = not bias.is_contiguous()
        bias = bias.contiguous()
        meta = dict(BLOCK=tile.block, ROWS=tile.rows, ACT=activation, PRECISE=x.dtype == torch.float32,
                    num_warps=tile.num_warps)
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)  # stands in for grad_y too
        launch, self.partials_shape = _activations.bind_bias_grad(
            _add_mul_act_bwd_kernel, x, row_tiles, tile.col_blocks,
            lambda partials, tiles_per_group: (xl.tensor, yl.tensor, bias, gl.tensor, grad_x, grad_x, partials, 1.0,
                                               xl.rows, n, tiles_per_group, *xl.kernel_args(), *yl.kernel_args(),
                                               *gl.kernel_args()),
            meta, runtime=8)
        self.launch = _rows.copying(launch, (xl.copied, yl.copied, copy_bias, gl.copied))

    def __call__(self, x, y, bias, grad, alpha: float):
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)
        grad_y = torch.empty_like(x, memory_format=torch.contiguous_format)
        if self.launch is None:
            return grad_x, grad_y, torch.zeros(self.partials_shape, dtype=torch.float64, device=x.device)
        partials = torch.empty(self.partials_shape, dtype=torch.float64, device=x.device)
        self.launch(x, y, bias, grad, grad_x, grad_y, partials, alpha)
        return grad_x, grad_y, partials


class _AddMulAct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, bias, alpha: float, activation: str):
        ctx.save_for_backward(x, y, bias)
        ctx.alpha, ctx.activation = alpha, activation
        return _forward(x, y, bias, alpha, activation)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, y, bias = ctx.saved_tensors
        if grad.dtype != x.dtype:
            grad = grad.to(x.dtype)
        grad_x, grad_y, partials = _backward(x, y, bias, ctx.alpha, ctx.activation, grad)
        grad_bias = partials.sum(dim=0).to(bias.dtype)
        need_x, need_y, need_bias = ctx.needs_input_grad[:3]
        return (grad_x if need_x else None, grad_y if need_y else None,
                grad_bias if need_bias else None, None, None)


# ----------------------------------------------------------------------------------------------
# Custom ops (kernels/_ops.py): the same launchers as the eager path, so bitwise the same. The
# backward op finishes grad_bias itself: the partials' row count depends on the device
# (_activations.bias_grad_groups), which a fake implementation cannot know.
# ----------------------------------------------------------------------------------------------


@_ops.op(OP, "(Tensor x, Tensor y, Tensor bias, float alpha, str activation) -> Tensor")
def add_mul_act_op(x, y, bias, alpha, activation):
    """:func:`add_mul_act` as a custom op."""
    return _forward(x, y, bias, alpha, activation)


@add_mul_act_op.register_fake
def _(x, y, bias, alpha, activation):
    return _ops.empty_like(x)


@_ops.op(f"{OP}_backward", "(Tensor x, Tensor y, Tensor bias, Tensor grad, float alpha, str activation) -> Tensor[]")
def add_mul_act_backward(x, y, bias, grad, alpha, activation):
    """[grad_x, grad_y, grad_bias]."""
    grad_x, grad_y, partials = _backward(x, y, bias, alpha, activation, grad)
    return [grad_x, grad_y, partials.sum(dim=0).to(bias.dtype)]


@add_mul_act_backward.register_fake
def _(x, y, bias, grad, alpha, activation):
    return [_ops.empty_like(x), _ops.empty_like(x), bias.new_empty(bias.shape)]


def _setup(ctx, inputs, output):
    x, y, bias, alpha, activation = inputs
    ctx.save_for_backward(x, y, bias)
    ctx.alpha, ctx.activation = alpha, activation


def register_autograd(op, backward_op) -> None:
    """``op``'s autograd formula, its backward computed by ``backward_op`` (same schema as
    ``add_mul_act_backward``); the CUDA implementation's op registers its own through this too."""

    def backward(ctx, grad):
        x, y, bias = ctx.saved_tensors
        grads = backward_op(x, y, bias, grad.to(x.dtype), ctx.alpha, ctx.activation)
        return _ops.asked(grads, ctx.needs_input_grad, rest=2)

    op.register_autograd(backward, setup_context=_setup)


register_autograd(add_mul_act_op, add_mul_act_backward)


def _validate(x, y, bias, alpha, activation) -> float:
    check_tensor(OP, "x", x, min_ndim=1)
    check_tensor(OP, "y", y)
    check_tensor(OP, "bias", bias)
    check_same_device(OP, x=x, y=y, bias=bias)
    check_same_dtype(OP, x=x, y=y, bias=bias)
    check_shape(OP, "y", y, x.shape, "the same shape as x")
    check_shape(OP, "bias", bias, x.shape[-1:], "one value per element of x's last dimension")
    alpha = check_finite_scalar(OP, "alpha", alpha)
    check_choice(OP, "activation", activation, ACTIVATIONS)
    return alpha


def add_mul_act(
    x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float = 1.0, activation: str = "relu"
) -> torch.Tensor:
    """``act(x + alpha * y + bias)`` with act one of relu, sigmoid, silu, gelu_tanh.

    x, y: same shape ``(..., N)`` (``ndim >= 1``, any strides); bias: ``(N,)``; all three of one
    dtype (float32, float16, bfloat16) on one device. Returns a new contiguous tensor of x's shape
    and dtype; differentiable in x, y and bias.

    Raises TypeError for a non-tensor, an unsupported or mismatched dtype, or a non-numeric alpha;
    ValueError for a wrong shape, device, a non-finite alpha or an unknown activation.
    """
    alpha = _validate(x, y, bias, alpha, activation)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return add_mul_act_op(x, y, bias, alpha, activation)
    if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad or bias.requires_grad):
        return _AddMulAct.apply(x, y, bias, alpha, activation)
    return _forward(x, y, bias, alpha, activation)  # no graph to record: skip autograd's overhead
