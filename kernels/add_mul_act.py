"""``act(x + alpha * y + bias)``: one Triton pass forward, one Triton pass backward.

x and y have shape ``(..., N)``, bias has shape ``(N,)`` and is broadcast over the rows. The forward
reads x, y and bias once and writes the output once; nothing intermediate touches memory.

The backward needs ``act'(z)``, ``z = x + alpha * y + bias``, and writes ``grad_x = grad * act'(z)``
and ``grad_y = alpha * grad_x`` in one pass:

* relu's slope is one bit, ``z > 0`` (1 for NaN, as torch's threshold_backward). A forward that
  records a graph stores it packed, 8 columns a byte (N/8 bytes a row), and the backward reads
  those bits and grad. Bytes an element for fp32, forward+backward: 12 + 1/8 forward (x, y, out,
  the bits), 12 + 1/8 backward (the bits, grad, grad_x, grad_y): 24.25, where saving the output
  as eager does costs 28 (the backward reads out, 4 bytes) and recomputing z costs 32. The saved
  bits are also the smallest thing to keep: N/8 bytes a row instead of x, y and bias.
* The other activations recompute z from the saved inputs: their slope is not a function of a
  stored bit, and saving z would cost the forward a full write.

``grad_bias``, the sum of grad_x over rows, is reduced without a second pass over the tensors and
without atomics: each program walks a fixed group of rows for one column block, keeps a running
sum in registers and writes one partial row; ``kernels/_partials.py`` adds those partials (one per
row group) in a fixed order. The grouping depends only on the shape, so results are bitwise
reproducible. The running sums and the partials are fp64 (cheap: one add per element, and the
partials are tiny), so the reduction adds no error of its own: grad_bias is rounded once, at the
end.

Arithmetic in the compute dtype of ``kernels/_rows.py``'s tiles (fp32; fp64 for fp32 results,
so that z is exact), results stored in the input dtype. The activations and their derivatives are
the shared, interpreter-safe forms of ``kernels/_activations.py`` (gelu's tanh form written through
the sigmoid, the sigmoid from ``exp(-|z|)``); ``kernels/cuda/add_mul_act.py`` is the same op as a
CUDA C++ extension. Inside ``torch.compile`` (the custom ops below) every activation recomputes z.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels import _activations, _launch, _native, _ops, _rows
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


@triton.jit
def _byte_columns(cols, BLOCK: tl.constexpr, PACK: tl.constexpr):
    """The bytes of packed bits that a tile's BLOCK columns ``cols`` fall in (PACK columns a byte:
    8, or BLOCK where a row is narrower than 8 and one block holds it)."""
    return tl.min(tl.reshape(cols, [BLOCK // PACK, PACK]), axis=1) // PACK


@triton.jit
def _store_bits(bits_ptr, bit, rows, cols, n_rows, n_cols,
                ROWS: tl.constexpr, BLOCK: tl.constexpr, PACK: tl.constexpr):
    """Store a [ROWS, BLOCK] tile of 0/1 ints as bits: bit j of byte k of a row is column 8k + j
    (rows of ceil(N / 8) bytes)."""
    shifted = tl.reshape(bit, [ROWS, BLOCK // PACK, PACK]) << tl.arange(0, PACK)[None, None, :]
    packed = tl.sum(shifted, axis=2)
    bytes_ = _byte_columns(cols, BLOCK, PACK)
    ok = (rows < n_rows)[:, None] & (bytes_ * PACK < n_cols)[None, :]
    tl.store(bits_ptr + rows.to(tl.int64)[:, None] * ((n_cols + 7) // 8) + bytes_[None, :], packed.to(tl.uint8),
             mask=ok)


@triton.jit
def _load_bits(bits_ptr, rows, cols, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr, PACK: tl.constexpr):
    """The [ROWS, BLOCK] tile of 0/1 ints (int32) that :func:`_store_bits` stored (0 outside)."""
    bytes_ = _byte_columns(cols, BLOCK, PACK)
    ok = (rows < n_rows)[:, None] & (bytes_ * PACK < n_cols)[None, :]
    packed = tl.load(bits_ptr + rows.to(tl.int64)[:, None] * ((n_cols + 7) // 8) + bytes_[None, :], mask=ok, other=0)
    spread = tl.broadcast_to(packed.to(tl.int32)[:, :, None], [ROWS, BLOCK // PACK, PACK])
    return tl.reshape((spread >> tl.arange(0, PACK)[None, None, :]) & 1, [ROWS, BLOCK])


@_launch.jit
def _add_mul_act_fwd_kernel(
    x_ptr, y_ptr, b_ptr, out_ptr, bits_ptr, alpha, n_rows, n_cols,
    x_inner, x_so, x_si, y_inner, y_so, y_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
    BITS: tl.constexpr, PACK: tl.constexpr,
):
    # BITS (relu, recording a graph): also store the slope's bits (module docstring)
    rows, cols, mask = _rows.tile(ROWS, BLOCK, n_rows, n_cols)
    z = _load_z(x_ptr, y_ptr, b_ptr, rows, cols, mask, n_cols, alpha,
                x_inner, x_so, x_si, y_inner, y_so, y_si, PRECISE)
    out = _activations.activate(z, ACT, PRECISE)
    tl.store(out_ptr + _rows.dense_offsets(rows, cols, n_cols), _rows.cast_for_store(out, out_ptr), mask=mask)
    if BITS:
        bit = (_activations.activation_slope(z, ACT, PRECISE) != 0).to(tl.int32)
        _store_bits(bits_ptr, bit, rows, cols, n_rows, n_cols, ROWS, BLOCK, PACK)


@triton.jit
def _write_grads(dz, rows, cols, mask, n_cols, gx_ptr, gy_ptr, alpha):
    """Store grad_x = dz and grad_y = alpha * dz for a tile; dz in fp64 for grad_bias's sum."""
    dense = _rows.dense_offsets(rows, cols, n_cols)
    tl.store(gx_ptr + dense, _rows.cast_for_store(dz, gx_ptr), mask=mask)
    tl.store(gy_ptr + dense, _rows.cast_for_store(alpha * dz, gy_ptr), mask=mask)
    return dz.to(tl.float64)


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
        acc += _write_grads(dz, rows, cols, mask, n_cols, gx_ptr, gy_ptr, alpha)
    tl.store(partial_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


@_launch.jit(do_not_specialize=["tiles_per_group"])
def _add_mul_act_bits_bwd_kernel(
    bits_ptr, g_ptr, gx_ptr, gy_ptr, partial_ptr, alpha, n_rows, n_cols, tiles_per_group, g_inner, g_so, g_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, PRECISE: tl.constexpr, PACK: tl.constexpr,
):
    # As _add_mul_act_bwd_kernel, the slope read from the forward's bits (relu): the same products
    # (grad times a slope of 0.0 or 1.0 in the compute dtype), so the same bits of every result.
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    group = tl.program_id(1)
    acc = tl.zeros([ROWS, BLOCK], tl.float64)
    for t in range(0, tiles_per_group):
        rows = (group * tiles_per_group + t) * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        g = _rows.load_tile(g_ptr, rows, cols, mask, g_inner, g_so, g_si, PRECISE)
        slope = _load_bits(bits_ptr, rows, cols, n_rows, n_cols, ROWS, BLOCK, PACK).to(g.dtype)
        dz = tl.where(mask, g * slope, 0.0)
        acc += _write_grads(dz, rows, cols, mask, n_cols, gx_ptr, gy_ptr, alpha)
    tl.store(partial_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


# A call's host work is a dictionary lookup: a plan per call signature (layouts, dtype, device,
# alignment, activation, whether the slope's bits are stored) holds the launcher bound to its grid
# and fixed arguments (_launch.Kernel.bind), and the backward's row grouping.
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()


def _key(x, y, bias, activation: str) -> tuple:
    return (x.shape, x.stride(), y.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, y.data_ptr() & 15 == 0,
            bias.is_contiguous(), bias.data_ptr() & 15 == 0, activation)


def _bits_shape(x: torch.Tensor) -> tuple[int, int]:
    """The packed slope bits of x's rows: (rows, ceil(N / 8)) bytes."""
    return math.prod(x.shape[:-1]), (x.shape[-1] + 7) // 8


def _pack(tile: _rows.RowTile) -> int:
    """Columns a byte of bits covers in a tile's terms: 8, or the block of a row narrower than 8
    (one block then holds the row, so every block starts on a byte)."""
    if tile.block < 8 and tile.col_blocks > 1:
        raise ValueError(f"add_mul_act: a tile of {tile.block}-column blocks splits a row across bytes of bits")
    return min(tile.block, 8)


class _ForwardPlan:
    """A forward call signature's launcher: ``raw`` reads every layout in place (None for an empty
    tensor), ``copied`` says which of x, y and bias a call copies first, ``launch`` does so.
    Called as ``launch(x, y, bias, out, bits, alpha)``; without ``bits``, ``out`` stands in for
    the bits (the launcher was bound so)."""

    def __init__(self, x, y, bias, activation: str, bits: bool):
        self.raw, self.copied, self.launch = None, (False, False, False), _rows.nothing
        if x.numel() == 0:
            return
        xl, yl = _rows.row_layout(x), _rows.row_layout(y)
        tile = _rows.elementwise_tile(xl.n, x.dtype)
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        stored = torch.empty(_bits_shape(x), dtype=torch.uint8, device=x.device) if bits else out
        self.raw = _add_mul_act_fwd_kernel.bind(
            _rows.tile_grid(xl.rows, tile),
            (xl.tensor, yl.tensor, bias.contiguous(), out, stored, 1.0, xl.rows, xl.n, *xl.kernel_args(),
             *yl.kernel_args()),
            dict(BLOCK=tile.block, ROWS=tile.rows, ACT=activation, PRECISE=x.dtype == torch.float32,
                 BITS=bits, PACK=_pack(tile), num_warps=tile.num_warps),
            runtime=6)
        self.copied = (xl.copied, yl.copied, not bias.is_contiguous())
        self.launch = _rows.copying(self.raw, self.copied)


def _forward(x, y, bias, alpha: float, activation: str, bits: bool = False):
    """The output; with ``bits`` (relu only) (the output, the slope's packed bits)."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    key = (_key(x, y, bias, activation), bits)
    plan = _FORWARD_PLANS.get(key) or _launch.remember(_FORWARD_PLANS, key, _ForwardPlan(x, y, bias, activation, bits))
    if not bits:
        plan.launch(x, y, bias, out, out, alpha)
        return out
    stored = torch.empty(_bits_shape(x), dtype=torch.uint8, device=x.device)
    plan.launch(x, y, bias, out, stored, alpha)
    return out, stored


class _BackwardPlan:
    """A backward call signature's row grouping and bound launchers: from the saved inputs
    (``activation``) or from relu's bits (``activation=None``; x, y and bias then stand for
    nothing but x's shape, dtype and device). ``copied`` as :class:`_ForwardPlan`'s; ``grads`` is
    a BiasGrad (``kernels/_activations.py``: its ``launch`` reads every layout in place) or None for
    an empty tensor. The row grouping is sized with grad laid out dense, whatever its layout
    (``_activations.bind_bias_grad``)."""

    def __init__(self, x, y, bias, activation: str | None, grad):
        n = x.shape[-1]
        self.grads = None
        self.copied = (False, False, False, False)
        if x.numel() == 0:
            return
        gl = _rows.row_layout(grad)
        dense = _rows.dense_layout(grad)
        tile = _rows.elementwise_tile(n, x.dtype, backward=True)
        row_tiles = triton.cdiv(gl.rows, tile.rows)
        meta = dict(BLOCK=tile.block, ROWS=tile.rows, PRECISE=x.dtype == torch.float32, num_warps=tile.num_warps)
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)  # stands in for grad_y too
        if activation is None:
            stored = torch.empty(_bits_shape(x), dtype=torch.uint8, device=x.device)

            def args(g):
                return lambda partials, tiles_per_group: (stored, g.tensor, grad_x, grad_x, partials, 1.0, g.rows, n,
                                                          tiles_per_group, *g.kernel_args())
            self.grads = _activations.bind_bias_grad(
                _add_mul_act_bits_bwd_kernel, x, row_tiles, tile.col_blocks, args(gl), {**meta, "PACK": _pack(tile)},
                runtime=6, dtype=x.dtype, sizing_args=args(dense))
            self.copied = (False, gl.copied)
        else:
            xl, yl = _rows.row_layout(x), _rows.row_layout(y)
            copy_bias = not bias.is_contiguous()
            bias = bias.contiguous()

            def args(g):
                return lambda partials, tiles_per_group: (xl.tensor, yl.tensor, bias, g.tensor, grad_x, grad_x,
                                                          partials, 1.0, xl.rows, n, tiles_per_group,
                                                          *xl.kernel_args(), *yl.kernel_args(), *g.kernel_args())
            self.grads = _activations.bind_bias_grad(
                _add_mul_act_bwd_kernel, x, row_tiles, tile.col_blocks, args(gl), {**meta, "ACT": activation},
                runtime=8, dtype=x.dtype, sizing_args=args(dense))
            self.copied = (xl.copied, yl.copied, copy_bias, gl.copied)
        self.launch = _rows.copying(self.grads.launch, self.copied)

    def __call__(self, grad, *saved, alpha: float, like: torch.Tensor):
        """(grad_x, grad_y, partials) from ``saved`` (x, y, bias; or the bits) and grad; ``like``:
        x or a tensor of its shape, dtype and device."""
        grad_x = torch.empty(like.shape, dtype=like.dtype, device=like.device)
        grad_y = torch.empty(like.shape, dtype=like.dtype, device=like.device)
        if self.grads is None:
            return grad_x, grad_y, torch.zeros((1, like.shape[-1]), dtype=torch.float64, device=like.device)
        partials = torch.empty(self.grads.partials_shape, dtype=torch.float64, device=like.device)
        self.launch(*saved, grad, grad_x, grad_y, partials, alpha)
        return grad_x, grad_y, partials

    def grad_bias(self, partials: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """grad_bias from the partials; ``like`` has x's dtype and device."""
        if self.grads is None:
            return torch.zeros(partials.shape[-1], dtype=like.dtype, device=like.device)
        return self.grads.grad_bias(partials)


def _backward_plan(x, y, bias, activation: str | None, grad) -> _BackwardPlan:
    """The plan of a backward call: from the saved inputs, or (``activation=None``) relu's bits."""
    if activation is None:
        key = (x.shape, x.dtype, x.device, grad.stride(), grad.data_ptr() & 15 == 0)
    else:
        key = (_key(x, y, bias, activation), grad.stride(), grad.data_ptr() & 15 == 0)
    return _BACKWARD_PLANS.get(key) or _launch.remember(_BACKWARD_PLANS, key,
                                                         _BackwardPlan(x, y, bias, activation, grad))


def _backward(x, y, bias, alpha: float, activation: str, grad: torch.Tensor, need_bias: bool = True):
    """(grad_x, grad_y, grad_bias or None) from the saved inputs."""
    plan = _backward_plan(x, y, bias, activation, grad)
    grad_x, grad_y, partials = plan(grad, x, y, bias, alpha=alpha, like=x)
    return grad_x, grad_y, plan.grad_bias(partials, x) if need_bias else None


def _bits_backward(stored, like: torch.Tensor, alpha: float, grad: torch.Tensor, need_bias: bool):
    """(grad_x, grad_y, grad_bias or None) from relu's bits; ``like`` has x's shape, dtype and
    device (a one-element view expanded to x's shape stands in)."""
    plan = _backward_plan(like, None, None, None, grad)
    grad_x, grad_y, partials = plan(grad, stored, alpha=alpha, like=like)
    return grad_x, grad_y, plan.grad_bias(partials, like) if need_bias else None


class _AddMulAct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, bias, alpha: float, activation: str):
        ctx.alpha, ctx.activation = alpha, activation
        if activation == "relu":  # the slope's bits are all the backward reads
            out, stored = _forward(x, y, bias, alpha, activation, bits=True)
            ctx.save_for_backward(stored)
            ctx.like = x.new_empty(()).expand(x.shape)  # x's shape, dtype and device; one element
            return out
        ctx.save_for_backward(x, y, bias)
        return _forward(x, y, bias, alpha, activation)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        need_x, need_y, need_bias = ctx.needs_input_grad[:3]
        if ctx.activation == "relu":
            (stored,) = ctx.saved_tensors
            like = ctx.like
            grads = _bits_backward(stored, like, ctx.alpha, grad.to(like.dtype), need_bias)
        else:
            x, y, bias = ctx.saved_tensors
            grads = _backward(x, y, bias, ctx.alpha, ctx.activation, grad.to(x.dtype), need_bias)
        return _ops.asked(grads, (need_x, need_y, need_bias), rest=2)


# ----------------------------------------------------------------------------------------------
# Custom ops (kernels/_ops.py): the same launchers as the eager path, so bitwise the same (they
# recompute z for every activation, relu's included). The backward op returns grad_bias itself:
# the partials' row count depends on the device (_activations.bias_grad_groups), which a fake
# implementation cannot know.
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
    return list(_backward(x, y, bias, alpha, activation, grad))


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


# The native path (kernels/_native.py): one program per call signature read in place, with its
# backward where an input needs a gradient; the same kernels, tiles and arguments as the plans
# above. Per-call float: [alpha].
_NATIVE_PLANS = _launch.plan_table()
# The entry point's first step, one per activation (``_native.Entry``):
# ``_ENTRIES[activation].call(x, y, bias, alpha)`` runs a recorded signature's program with no
# Python, or returns None. alpha: any finite number.
_ENTRIES = {activation: _native.Entry(3, floats=((float("-inf"), None),)) for activation in ACTIVATIONS}


def _native_call(x, y, bias, alpha: float, activation: str) -> torch.Tensor | None:
    """The call through the native path, or None where it does not serve it (arguments validated)."""
    grad = torch.is_grad_enabled() and (x.requires_grad or y.requires_grad or bias.requires_grad)
    needs = (x.requires_grad, y.requires_grad, bias.requires_grad) if grad else None
    outputs = _native.serve(_NATIVE_PLANS, (_key(x, y, bias, activation), bias.stride(), needs),
                            lambda: _native_program(x, y, bias, activation, needs), _ENTRIES[activation],
                            (x, y, bias), [alpha], graph=needs is not None)
    return None if outputs is None else outputs[0]


def _native_program(x, y, bias, activation: str, needs: tuple[bool, bool, bool] | None) -> object:
    if x.numel() == 0 or any(t.data_ptr() & 15 for t in (x, y, bias)):
        return _native.NOT_SERVED
    bits = needs is not None and activation == "relu"
    plan = _ForwardPlan(x, y, bias, activation, bits)
    if any(plan.copied):
        return _native.NOT_SERVED
    forward = _native.Builder(3, like=(x, y, bias))
    xs, ys, bs = forward.given
    out = forward.empty(x.shape, x.dtype)
    stored = forward.empty(_bits_shape(x), torch.uint8) if bits else out
    try:
        forward.launch(plan.raw, xs, ys, bs, out, stored, forward.float_arg(0))
        if needs is None:
            return _native.program(forward, [out])
        grad = torch.empty_like(x, memory_format=torch.contiguous_format)
        bplan = _BackwardPlan(x, None, None, None, grad) if bits else _BackwardPlan(x, y, bias, activation, grad)
        if any(bplan.copied):
            return _native.NOT_SERVED
        saved = [stored] if bits else [xs, ys, bs]
        backward = _native.Builder(len(saved) + 1)
        gx, gy = backward.empty(x.shape, x.dtype), backward.empty(x.shape, x.dtype)
        partials = backward.empty(bplan.grads.partials_shape, torch.float64)
        backward.launch(bplan.grads.launch, *backward.given, gx, gy, partials, backward.float_arg(0))
        gb = None
        if needs[2]:
            gb = backward.empty(x.shape[-1:], x.dtype)
            backward.launch(bplan.grads.finish, partials, gb)
    except _native.Unsupported:
        return _native.NOT_SERVED
    return _native.program(forward, [out], saved=saved, backward=backward,
                           gradients=[gx if needs[0] else None, gy if needs[1] else None, gb],
                           grad_layouts=[forward.layout(out)])


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
    if not _ops.route():  # a signature seen before, the native path on: its program, run in C++
        entry = _ENTRIES.get(activation) if type(activation) is str else None
        out = entry.call(x, y, bias, alpha) if entry is not None else None
        if out is not None:
            return out
    alpha = _validate(x, y, bias, alpha, activation)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return add_mul_act_op(x, y, bias, alpha, activation)
    if _native.enabled():  # C++ host path (kernels/_native.py)
        out = _native_call(x, y, bias, alpha, activation)
        if out is not None:
            return out
    if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad or bias.requires_grad):
        return _AddMulAct.apply(x, y, bias, alpha, activation)
    return _forward(x, y, bias, alpha, activation)  # no graph to record: skip autograd's overhead
