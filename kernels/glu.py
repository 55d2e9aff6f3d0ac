"""Gated linear units, ``act(a) * b``: SwiGLU (silu) and GEGLU (gelu, exact or tanh form).

Two entry points share the same two Triton kernels:

* :func:`glu` takes the gate ``a`` and the value ``b`` as two tensors of one shape ``(..., N)``;
* :func:`glu_packed` takes one tensor ``x`` of shape ``(..., 2N)``, the output of a single fused
  up-projection, and gates its second half with its first: ``act(x[..., :N]) * x[..., N:]``.

The halves of ``x`` are passed to the kernels as two column slices of ``x`` (``kernels/_rows.py``
reads column slices in place: same row stride, a base pointer N elements on), so the packed form
costs no copy and no extra kernel, and its backward writes grad_a and grad_b straight into the two
halves of one ``(..., 2N)`` grad_x. One pass forward (read a and b, write the output), one pass
backward (read a, b and grad; write both gradients, from act(a) and act'(a) computed together,
``kernels/_activations.py``). No reduction, so every element is computed the same way whatever the
tiling: bitwise reproducible. Arithmetic in fp32. fp32 results: SwiGLU's forward is ``F.silu``'s own
fp32 computation times b in fp32 (``_activations.silu_as_eager``, memory-bound, on the fp32-math
tile); GEGLU's forward multiplies in fp64 (the tanh form's activation in fp64, the exact form's
value eager's fp32 ``gelu_as_eager``), and every backward evaluates the slope in fp64
(``kernels/_activations.py`` says why).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _activations, _launch, _native, _ops, _rows
from kernels._validate import check_choice, check_same_device, check_same_dtype, check_shape, check_tensor

ACTIVATIONS = ("silu", "gelu", "gelu_tanh")  # SwiGLU, GEGLU (exact), GEGLU (tanh approximation)

# Three streams (a, b, out), tiled as every elementwise kernel (_rows.elementwise_limits).


def block_boundaries() -> tuple[int, ...]:
    """Row lengths (N, the width of one half) where the tiling changes on the current backend."""
    return _rows.elementwise_block_boundaries()


@_launch.jit
def _glu_fwd_kernel(
    a_ptr, b_ptr, out_ptr, n_rows, n_cols, a_inner, a_so, a_si, b_inner, b_so, b_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
):
    rows, cols, mask = _rows.tile(ROWS, BLOCK, n_rows, n_cols)
    if PRECISE and ACT == "silu":
        # SwiGLU's fp32 result as eager computes it, silu(a) rounded, then * b: fp32 arithmetic
        # (kernels/_activations.py's silu_as_eager), eager's value bit for bit
        a = _rows.load_tile(a_ptr, rows, cols, mask, a_inner, a_so, a_si, False)
        b = _rows.load_tile(b_ptr, rows, cols, mask, b_inner, b_so, b_si, False)
        out = _activations.silu_as_eager(a) * b
    else:
        a = _rows.load_tile(a_ptr, rows, cols, mask, a_inner, a_so, a_si, PRECISE)
        b = _rows.load_tile(b_ptr, rows, cols, mask, b_inner, b_so, b_si, PRECISE)
        out = _activations.activate(a, ACT, PRECISE) * b
    tl.store(out_ptr + _rows.dense_offsets(rows, cols, n_cols), _rows.cast_for_store(out, out_ptr), mask=mask)


@_launch.jit
def _glu_bwd_kernel(
    a_ptr, b_ptr, g_ptr, ga_ptr, gb_ptr, n_rows, n_cols, grad_row_stride,
    a_inner, a_so, a_si, b_inner, b_so, b_si, g_inner, g_so, g_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
):
    # grad_a and grad_b are dense rows of grad_row_stride elements: N for two separate tensors,
    # 2N for the two halves of the packed form's grad_x (gb_ptr then points N elements on).
    rows, cols, mask = _rows.tile(ROWS, BLOCK, n_rows, n_cols)
    a = _rows.load_tile(a_ptr, rows, cols, mask, a_inner, a_so, a_si, PRECISE)
    b = _rows.load_tile(b_ptr, rows, cols, mask, b_inner, b_so, b_si, PRECISE)
    g = _rows.load_tile(g_ptr, rows, cols, mask, g_inner, g_so, g_si, PRECISE)
    # With PRECISE act and slope are fp64 and so are these products (slope first, so that g * b
    # is not rounded to fp32 on the way): each gradient is rounded once, at its store.
    act, slope = _activations.activate_with_slope(a, ACT, PRECISE)
    dense = _rows.dense_offsets(rows, cols, grad_row_stride)
    tl.store(ga_ptr + dense, _rows.cast_for_store(slope * b * g, ga_ptr), mask=mask)
    tl.store(gb_ptr + dense, _rows.cast_for_store(act * g, gb_ptr), mask=mask)


def _launch_grid(layout: _rows.RowLayout, dtype: torch.dtype, backward: bool, activation: str):
    # SwiGLU's forward is fp32 arithmetic for every dtype (fp32 results: silu_as_eager)
    tile = _rows.elementwise_tile(layout.n, dtype, backward, fp64_math=activation != "silu")
    return tile, _rows.tile_grid(layout.rows, tile)


# A call's host work is a dictionary lookup: a plan per call signature (layouts, dtype, device,
# alignment, activation) holds the launcher bound to its grid and fixed arguments (_launch.Kernel.bind).
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()


def _forward(a: torch.Tensor, b: torch.Tensor, activation: str) -> torch.Tensor:
    out = torch.empty_like(a, memory_format=torch.contiguous_format)
    key = (a.shape, a.stride(), b.stride(), a.dtype, a.device, a.data_ptr() & 15 == 0, b.data_ptr() & 15 == 0,
           activation)
    plan = _FORWARD_PLANS.get(key) or _launch.remember(_FORWARD_PLANS, key, _forward_plan(a, b, out, activation))
    plan(a, b, out)
    return out


def _forward_plan(a, b, out, activation: str):
    if out.numel() == 0:
        return _rows.nothing
    return _rows.copying(*_forward_launch(a, b, out, activation))


def _forward_launch(a, b, out, activation: str) -> tuple:
    """(the launcher that reads a and b in place, which of the two a call must copy first)."""
    al, bl = _rows.row_layout(a), _rows.row_layout(b)
    tile, grid = _launch_grid(al, a.dtype, False, activation)
    launch = _glu_fwd_kernel.bind(
        grid, (al.tensor, bl.tensor, out, al.rows, al.n, *al.kernel_args(), *bl.kernel_args()),
        dict(BLOCK=tile.block, ROWS=tile.rows, ACT=activation, PRECISE=a.dtype == torch.float32,
             num_warps=tile.num_warps),
        runtime=3)
    return launch, (al.copied, bl.copied)


def _backward_into(a, b, grad, grad_a, grad_b, activation: str) -> None:
    """Write grad_a and grad_b, 2-D ``(rows, N)`` views with unit column stride and one row
    stride between them, from a, b and grad."""
    key = (a.shape, a.stride(), b.stride(), grad.stride(), grad_a.stride(), a.dtype, a.device,
           a.data_ptr() & 15 == 0, b.data_ptr() & 15 == 0, grad.data_ptr() & 15 == 0, grad_a.data_ptr() & 15 == 0,
           grad_b.data_ptr() & 15 == 0, activation)
    plan = _BACKWARD_PLANS.get(key) or _launch.remember(
        _BACKWARD_PLANS, key, _backward_plan(a, b, grad, grad_a, grad_b, activation))
    plan(a, b, grad, grad_a, grad_b)


def _backward_plan(a, b, grad, grad_a, grad_b, activation: str):
    return _rows.copying(*_backward_launch(a, b, grad, grad_a, grad_b, activation))


def _backward_launch(a, b, grad, grad_a, grad_b, activation: str) -> tuple:
    """(the launcher that reads a, b and grad in place, which of the three a call must copy first)."""
    al, bl, gl = _rows.row_layout(a), _rows.row_layout(b), _rows.row_layout(grad)
    tile, grid = _launch_grid(al, a.dtype, True, activation)
    launch = _glu_bwd_kernel.bind(
        grid, (al.tensor, bl.tensor, gl.tensor, grad_a, grad_b, al.rows, al.n, grad_a.stride(0),
               *al.kernel_args(), *bl.kernel_args(), *gl.kernel_args()),
        dict(BLOCK=tile.block, ROWS=tile.rows, ACT=activation, PRECISE=a.dtype == torch.float32,
             num_warps=tile.num_warps),
        runtime=5)
    return launch, (al.copied, bl.copied, gl.copied)


class _Glu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, activation: str):
        ctx.save_for_backward(a, b)
        ctx.activation = activation
        return _forward(a, b, activation)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        if grad.dtype != a.dtype:
            grad = grad.to(a.dtype)
        grad_a = torch.empty_like(a, memory_format=torch.contiguous_format)
        grad_b = torch.empty_like(a, memory_format=torch.contiguous_format)
        if a.numel():
            n = a.shape[-1]
            _backward_into(a, b, grad, grad_a.view(-1, n), grad_b.view(-1, n), ctx.activation)
        need_a, need_b = ctx.needs_input_grad[:2]
        return grad_a if need_a else None, grad_b if need_b else None, None


class _GluPacked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, activation: str):
        ctx.save_for_backward(x)
        ctx.activation = activation
        n = x.shape[-1] // 2
        return _forward(x[..., :n], x[..., n:], activation)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if grad.dtype != x.dtype:
            grad = grad.to(x.dtype)
        n = x.shape[-1] // 2
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)
        if x.numel():
            rows = grad_x.view(-1, 2 * n)
            _backward_into(x[..., :n], x[..., n:], grad, rows[:, :n], rows[:, n:], ctx.activation)
        return grad_x, None


# The custom ops (kernels/_ops.py): the same launchers as the eager path, so bitwise the same.


@_ops.op("glu", "(Tensor a, Tensor b, str activation) -> Tensor")
def glu_op(a, b, activation):
    """:func:`glu` as a custom op."""
    return _forward(a, b, activation)


@glu_op.register_fake
def _(a, b, activation):
    return _ops.empty_like(a)


@_ops.op("glu_backward", "(Tensor a, Tensor b, Tensor grad, str activation) -> Tensor[]")
def glu_backward(a, b, grad, activation):
    """[grad_a, grad_b]: the kernel writes both in one pass, whichever are needed."""
    grad_a, grad_b = _ops.empty_like(a), _ops.empty_like(a)
    if a.numel():
        n = a.shape[-1]
        _backward_into(a, b, grad, grad_a.view(-1, n), grad_b.view(-1, n), activation)
    return [grad_a, grad_b]


@glu_backward.register_fake
def _(a, b, grad, activation):
    return [_ops.empty_like(a), _ops.empty_like(a)]


def _glu_setup(ctx, inputs, output):
    a, b, activation = inputs
    ctx.save_for_backward(a, b)
    ctx.activation = activation


def _glu_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return _ops.asked(glu_backward(a, b, grad.to(a.dtype), ctx.activation), ctx.needs_input_grad, rest=1)


glu_op.register_autograd(_glu_backward, setup_context=_glu_setup)


@_ops.op("glu_packed", "(Tensor x, str activation) -> Tensor")
def glu_packed_op(x, activation):
    """:func:`glu_packed` as a custom op."""
    n = x.shape[-1] // 2
    return _forward(x[..., :n], x[..., n:], activation)


@glu_packed_op.register_fake
def _(x, activation):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@_ops.op("glu_packed_backward", "(Tensor x, Tensor grad, str activation) -> Tensor")
def glu_packed_backward(x, grad, activation):
    """grad_x, one ``(..., 2N)`` tensor: grad_a and grad_b written into its two halves."""
    n = x.shape[-1] // 2
    grad_x = _ops.empty_like(x)
    if x.numel():
        rows = grad_x.view(-1, 2 * n)
        _backward_into(x[..., :n], x[..., n:], grad, rows[:, :n], rows[:, n:], activation)
    return grad_x


@glu_packed_backward.register_fake
def _(x, grad, activation):
    return _ops.empty_like(x)


def _glu_packed_setup(ctx, inputs, output):
    x, activation = inputs
    ctx.save_for_backward(x)
    ctx.activation = activation


def _glu_packed_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return glu_packed_backward(x, grad.to(x.dtype), ctx.activation), None


glu_packed_op.register_autograd(_glu_packed_backward, setup_context=_glu_packed_setup)


# The native path of :func:`glu` (kernels/_native.py): one program per call signature read in
# place, with its backward where an input needs a gradient; the same kernels, tiles and arguments
# as the plans above. (:func:`glu_packed` keeps the Python path: its halves are one tensor's
# column slices, which a program's slots do not express.)
_NATIVE_PLANS = _launch.plan_table()
# The entry point's first step, one per activation (``_native.Entry``):
# ``_ENTRIES[activation].call(a, b)`` runs a recorded signature's program with no Python, or
# returns None.
_ENTRIES = {activation: _native.Entry(2) for activation in ACTIVATIONS}


def _native_call(a, b, activation: str) -> torch.Tensor | None:
    """The call through the native path, or None where it does not serve it (arguments validated)."""
    grad = torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)
    needs = (a.requires_grad, b.requires_grad) if grad else None
    key = (a.shape, a.stride(), b.stride(), a.dtype, a.device, a.data_ptr() & 15 == 0, b.data_ptr() & 15 == 0,
           activation, needs)
    outputs = _native.serve(_NATIVE_PLANS, key, lambda: _native_program(a, b, activation, needs), _ENTRIES[activation],
                            (a, b), graph=needs is not None)
    return None if outputs is None else outputs[0]


def _native_program(a, b, activation: str, needs: tuple[bool, bool] | None) -> object:
    if a.numel() == 0 or a.data_ptr() & 15 or b.data_ptr() & 15:
        return _native.NOT_SERVED
    out = torch.empty_like(a, memory_format=torch.contiguous_format)
    launch, copied = _forward_launch(a, b, out, activation)
    if any(copied):
        return _native.NOT_SERVED
    forward = _native.Builder(2, like=(a, b))
    a_s, b_s = forward.given
    outs = forward.empty(a.shape, a.dtype)
    try:
        forward.launch(launch, a_s, b_s, outs)
        if needs is None:
            return _native.program(forward, [outs])
        n = a.shape[-1]
        # out stands for a gradient in the output's layout; the gradients are dense rows of n
        launch, copied = _backward_launch(a, b, out, out.view(-1, n), out.view(-1, n), activation)
        if any(copied):
            return _native.NOT_SERVED
        backward = _native.Builder(3)
        ga, gb = backward.empty(a.shape, a.dtype), backward.empty(a.shape, a.dtype)
        backward.launch(launch, *backward.given, ga, gb)
    except _native.Unsupported:
        return _native.NOT_SERVED
    return _native.program(forward, [outs], saved=[a_s, b_s], backward=backward,
                           gradients=[ga if needs[0] else None, gb if needs[1] else None],
                           grad_layouts=[forward.layout(outs)])


def glu(a: torch.Tensor, b: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    """``act(a) * b``: SwiGLU with ``activation="silu"``, GEGLU with ``"gelu"`` (exact) or
    ``"gelu_tanh"``.

    a, b: the same shape ``(..., N)`` (``ndim >= 1``, any strides), one dtype (float32, float16,
    bfloat16), one device. Returns a new contiguous tensor of that shape; differentiable in a and b.

    Raises TypeError for a non-tensor or an unsupported or mismatched dtype; ValueError for a
    wrong shape or device or an unknown activation.
    """
    if not _ops.route():  # a signature seen before, the native path on: its program, run in C++
        entry = _ENTRIES.get(activation) if type(activation) is str else None
        out = entry.call(a, b) if entry is not None else None
        if out is not None:
            return out
    op = "glu"
    check_tensor(op, "a", a, min_ndim=1)
    check_tensor(op, "b", b)
    check_same_device(op, a=a, b=b)
    check_same_dtype(op, a=a, b=b)
    check_shape(op, "b", b, a.shape, "the same shape as a")
    check_choice(op, "activation", activation, ACTIVATIONS)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return glu_op(a, b, activation)
    if _native.enabled():  # C++ host path (kernels/_native.py)
        out = _native_call(a, b, activation)
        if out is not None:
            return out
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _Glu.apply(a, b, activation)
    return _forward(a, b, activation)


def glu_packed(x: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    """``act(x[..., :N]) * x[..., N:]`` for x of shape ``(..., 2N)``: the gated unit on the output
    of one fused up-projection (the gate first, as in ``torch.chunk(x, 2, -1)``).

    x: ``(..., 2N)`` with an even last dimension (any strides), float32, float16 or bfloat16.
    Returns a new contiguous ``(..., N)`` tensor; differentiable in x.

    Raises TypeError for a non-tensor or an unsupported dtype; ValueError for an odd last
    dimension, a wrong device or an unknown activation.
    """
    op = "glu_packed"
    check_tensor(op, "x", x, min_ndim=1)
    if x.shape[-1] % 2:
        raise ValueError(
            f"{op}: argument 'x' must have an even last dimension (the gate and the value side by "
            f"side), got shape {tuple(x.shape)}"
        )
    check_choice(op, "activation", activation, ACTIVATIONS)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return glu_packed_op(x, activation)
    if torch.is_grad_enabled() and x.requires_grad:
        return _GluPacked.apply(x, activation)
    n = x.shape[-1] // 2
    return _forward(x[..., :n], x[..., n:], activation)
