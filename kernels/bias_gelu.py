"""``gelu(x + bias)``: one Triton pass forward, one Triton pass backward.

The fused GELU of model-parallel training libraries: the bias add of a linear layer whose matmul
ran without it, folded into the activation. x has shape ``(..., N)``, bias ``(N,)`` broadcast over
the rows. ``approximate`` follows ``torch.nn.functional.gelu``: ``"none"`` is the exact form
``z Phi(z)`` (through an erfc written out, accurate in the tail where ``1 + erf`` cancels), ``"tanh"``
the tanh approximation (through the sigmoid); both from ``kernels/_activations.py``.

Forward: reads x and bias once, writes the output once. Backward: recomputes ``z = x + bias``
from the saved inputs (one add; saving z or the output would cost the forward a write, and gelu
is not invertible from its output) and writes ``grad_x = grad * gelu'(z)`` in one pass, reducing
``grad_bias`` (the sum of grad_x over rows) on the way in fp64 partial sums, one per row group,
which ``kernels/_partials.py`` adds (no atomics: bitwise reproducible; rounded once at the end).

Arithmetic in fp32 for 16-bit results, with the fast exp/div/erfc (their errors stay ~1e-5
relative, far below a 16-bit ulp).

fp32 results (``PRECISE``) of the tanh form build ``z = x + bias`` exactly in fp64 and evaluate
the value and the slope there: rounding z to fp32 first costs up to ~2 ulp of the result in
gelu's negative tail (z = -2.18: 2.01 ulp, the exact function at the rounded z), where eager's
error at that element can be far smaller (the rounded z alone reaches 2.05x eager's envelope
there), unless everything after it is eager's own computation too. That is what the exact form
does for fp32 results, in fp32 arithmetic:

* the forward value is eager's (``_activations.gelu_as_eager``: z rounded as eager's add rounds
  it, CUDA's erfcf), at 98% of a copy's bandwidth on an H100 on its own fp32-arithmetic tile,
  where the fp64 form was bound by the fp64 lanes (on an H200, whose memory is faster, erfcf
  bounds it, at 87% of a copy on a tile of its own);
* grad_x is eager's autograd through the reference (``_activations.gelu_grad_as_eager``: erfcf,
  expf, an uncontracted add), where the fp64 slope bound the backward by the fp64 lanes.

Both are eager's bits on the GPU but for flushed subnormals.

The tiling is every elementwise kernel's (``_rows.elementwise_limits``): blocks of up to 1024
columns, several short rows a program, forward programs in column-block order (``_rows.tile``),
strided leading dimensions read in place.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _activations, _launch, _native, _ops, _rows
from kernels._validate import check_choice, check_same_device, check_same_dtype, check_shape, check_tensor

OP = "bias_gelu"
APPROXIMATE = ("none", "tanh")
_ACT = {"none": "gelu", "tanh": "gelu_tanh"}



def block_boundaries() -> tuple[int, ...]:
    """Row lengths (N) where the tiling changes on the current backend (for test shapes)."""
    return _rows.elementwise_block_boundaries()


@triton.jit
def _load_z(x_ptr, b_ptr, rows, cols, mask, n_cols, x_inner, x_so, x_si, PRECISE: tl.constexpr):
    """z = x + bias for a [ROWS, BLOCK] tile (0 where masked), in the compute dtype (exact in fp64)."""
    x = _rows.load_tile(x_ptr, rows, cols, mask, x_inner, x_so, x_si, PRECISE)
    return x + _rows.load_vector(b_ptr, cols, n_cols, PRECISE)[None, :]


@_launch.jit
def _bias_gelu_fwd_kernel(
    x_ptr, b_ptr, out_ptr, n_rows, n_cols, x_inner, x_so, x_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
):
    rows, cols, mask = _rows.tile(ROWS, BLOCK, n_rows, n_cols)
    if ACT == "gelu":
        # z = x + bias in fp32 for every dtype. With PRECISE (fp32) the value is eager's fp32
        # computation (gelu_as_eager), whose z is eager's fp32 add: the exact fp64 sum rounded to
        # fp32 is that same number (double rounding is innocuous at 53 >= 2 * 24 + 2 bits), and the
        # fp32 add skips the wide load's fp32 <-> fp64 conversions (16 an SM a clock on an H100).
        z = _load_z(x_ptr, b_ptr, rows, cols, mask, n_cols, x_inner, x_so, x_si, False)
    else:
        z = _load_z(x_ptr, b_ptr, rows, cols, mask, n_cols, x_inner, x_so, x_si, PRECISE)
    out = _activations.activate(z, ACT, PRECISE)
    tl.store(out_ptr + _rows.dense_offsets(rows, cols, n_cols), _rows.cast_for_store(out, out_ptr), mask=mask)


@_launch.jit(do_not_specialize=["tiles_per_group"])
def _bias_gelu_bwd_kernel(
    x_ptr, b_ptr, g_ptr, gx_ptr, partial_ptr, n_rows, n_cols, tiles_per_group,
    x_inner, x_so, x_si, g_inner, g_so, g_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr, PRECISE: tl.constexpr,
):
    # Program (column block, row group): the group's row tiles one after another, grad_bias's
    # partial sum for the group in fp64 registers until the end.
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    group = tl.program_id(1)
    acc = tl.zeros([ROWS, BLOCK], tl.float64)
    for t in range(0, tiles_per_group):
        rows = (group * tiles_per_group + t) * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        if ACT == "gelu" and PRECISE:  # fp32 results: eager's fp32 gradient (gelu_grad_as_eager)
            z = _load_z(x_ptr, b_ptr, rows, cols, mask, n_cols, x_inner, x_so, x_si, False)
            g = _rows.load_tile(g_ptr, rows, cols, mask, g_inner, g_so, g_si, False)
            dz = tl.where(mask, _activations.gelu_grad_as_eager(z, g), 0.0)
        else:
            z = _load_z(x_ptr, b_ptr, rows, cols, mask, n_cols, x_inner, x_so, x_si, PRECISE)
            g = _rows.load_tile(g_ptr, rows, cols, mask, g_inner, g_so, g_si, PRECISE)
            dz = tl.where(mask, g * _activations.activation_slope(z, ACT, PRECISE), 0.0)
        tl.store(gx_ptr + _rows.dense_offsets(rows, cols, n_cols), _rows.cast_for_store(dz, gx_ptr), mask=mask)
        acc += dz.to(tl.float64)
    tl.store(partial_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


# A call's host work is a dictionary lookup: a plan per call signature (layouts, dtype, device,
# alignment, approximation) holds the launcher bound to its grid and fixed arguments
# (_launch.Kernel.bind), and the backward's row grouping.
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()


def _key(x: torch.Tensor, bias: torch.Tensor, approximate: str) -> tuple:
    return (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, bias.is_contiguous(),
            bias.data_ptr() & 15 == 0, approximate)


def _forward(x: torch.Tensor, bias: torch.Tensor, approximate: str) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    key = _key(x, bias, approximate)
    plan = _FORWARD_PLANS.get(key) or _launch.remember(_FORWARD_PLANS, key, _forward_plan(x, bias, out, approximate))
    plan(x, bias, out)
    return out


def _forward_plan(x, bias, out, approximate: str):
    if out.numel() == 0:
        return _rows.nothing
    return _rows.copying(*_forward_launch(x, bias, out, approximate))


def _forward_launch(x, bias, out, approximate: str) -> tuple:
    """(the launcher that reads x and bias in place, which of the two a call must copy first)."""
    xl = _rows.row_layout(x)
    tile = _rows.elementwise_tile(xl.n, x.dtype, fp64_math=approximate != "none")  # exact: eager's fp32 form
    launch = _bias_gelu_fwd_kernel.bind(
        _rows.tile_grid(xl.rows, tile), (xl.tensor, bias.contiguous(), out, xl.rows, xl.n, *xl.kernel_args()),
        dict(BLOCK=tile.block, ROWS=tile.rows, ACT=_ACT[approximate], PRECISE=x.dtype == torch.float32,
             num_warps=tile.num_warps),
        runtime=3)
    return launch, (xl.copied, not bias.is_contiguous())


def _backward(x: torch.Tensor, bias: torch.Tensor, approximate: str, grad: torch.Tensor, need_bias: bool = True):
    """(grad_x, grad_bias or None)."""
    key = (_key(x, bias, approximate), grad.stride(), grad.data_ptr() & 15 == 0)
    plan = _BACKWARD_PLANS.get(key) or _launch.remember(_BACKWARD_PLANS, key, _BackwardPlan(x, bias, approximate, grad))
    return plan(x, bias, grad, need_bias)


class _BackwardPlan:
    """A backward call signature's row grouping and bound launchers: ``grads``, a BiasGrad
    (``kernels/_activations.py``; None for an empty tensor) reading in place, ``copied`` which of
    x, bias and grad a call must copy first. The row grouping is sized with grad laid out dense,
    whatever its layout (``_activations.bind_bias_grad``)."""

    def __init__(self, x, bias, approximate: str, grad):
        n = x.shape[-1]
        self.grads, self.copied = None, (False, False, False)
        if x.numel() == 0:
            return
        xl, gl = _rows.row_layout(x), _rows.row_layout(grad)
        dense = _rows.dense_layout(grad)
        tile = _rows.elementwise_tile(n, x.dtype, backward=True)
        row_tiles = triton.cdiv(xl.rows, tile.rows)
        copy_bias = not bias.is_contiguous()
        bias = bias.contiguous()
        meta = dict(BLOCK=tile.block, ROWS=tile.rows, ACT=_ACT[approximate], PRECISE=x.dtype == torch.float32,
                    num_warps=tile.num_warps)
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)

        def args(g):
            return lambda partials, tiles_per_group: (xl.tensor, bias, g.tensor, grad_x, partials, xl.rows, n,
                                                      tiles_per_group, *xl.kernel_args(), *g.kernel_args())
        self.grads = _activations.bind_bias_grad(_bias_gelu_bwd_kernel, x, row_tiles, tile.col_blocks, args(gl), meta,
                                                 runtime=5, dtype=x.dtype, sizing_args=args(dense))
        self.copied = (xl.copied, copy_bias, gl.copied)
        self.launch = _rows.copying(self.grads.launch, self.copied)

    def __call__(self, x, bias, grad, need_bias: bool):
        grad_x = torch.empty_like(x, memory_format=torch.contiguous_format)
        if self.grads is None:
            return grad_x, torch.zeros_like(bias, memory_format=torch.contiguous_format) if need_bias else None
        partials = torch.empty(self.grads.partials_shape, dtype=torch.float64, device=x.device)
        self.launch(x, bias, grad, grad_x, partials)
        return grad_x, self.grads.grad_bias(partials) if need_bias else None


class _BiasGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias, approximate: str):
        ctx.save_for_backward(x, bias)
        ctx.approximate = approximate
        return _forward(x, bias, approximate)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        if grad.dtype != x.dtype:
            grad = grad.to(x.dtype)
        need_x, need_bias = ctx.needs_input_grad[:2]
        return _ops.asked(_backward(x, bias, ctx.approximate, grad, need_bias), (need_x, need_bias), rest=1)


# The custom ops (kernels/_ops.py): the same launchers as the eager path, so bitwise the same.
# The backward op returns grad_bias itself: the partials' row count depends on the device
# (_activations.bias_grad_groups), which a fake implementation cannot know.


@_ops.op(OP, "(Tensor x, Tensor bias, str approximate) -> Tensor")
def bias_gelu_op(x, bias, approximate):
    """:func:`bias_gelu` as a custom op."""
    return _forward(x, bias, approximate)


@bias_gelu_op.register_fake
def _(x, bias, approximate):
    return _ops.empty_like(x)


@_ops.op(f"{OP}_backward", "(Tensor x, Tensor bias, Tensor grad, str approximate) -> Tensor[]")
def bias_gelu_backward(x, bias, grad, approximate):
    """[grad_x, grad_bias]."""
    return list(_backward(x, bias, approximate, grad))


@bias_gelu_backward.register_fake
def _(x, bias, grad, approximate):
    return [_ops.empty_like(x), bias.new_empty(bias.shape)]


def _setup(ctx, inputs, output):
    x, bias, approximate = inputs
    ctx.save_for_backward(x, bias)
    ctx.approximate = approximate


def _backward_op(ctx, grad):
    x, bias = ctx.saved_tensors
    grad_x, grad_bias = bias_gelu_backward(x, bias, grad.to(x.dtype), ctx.approximate)
    return _ops.asked((grad_x, grad_bias), ctx.needs_input_grad, rest=1)


bias_gelu_op.register_autograd(_backward_op, setup_context=_setup)


def _validate(x, bias, approximate) -> None:
    check_tensor(OP, "x", x, min_ndim=1)
    check_tensor(OP, "bias", bias)
    check_same_device(OP, x=x, bias=bias)
    check_same_dtype(OP, x=x, bias=bias)
    check_shape(OP, "bias", bias, x.shape[-1:], "one value per element of x's last dimension")
    check_choice(OP, "approximate", approximate, APPROXIMATE)


# The native path (kernels/_native.py): one program per call signature read in place, with its
# backward where an input needs a gradient; the same kernels, tiles and arguments as the plans above.
_NATIVE_PLANS = _launch.plan_table()
# The entry point's first step, one per approximation (``_native.Entry``):
# ``_ENTRIES[approximate].call(x, bias)`` runs a recorded signature's program with no Python, or
# returns None.
_ENTRIES = {approximate: _native.Entry(2) for approximate in APPROXIMATE}


def _native_call(x, bias, approximate: str) -> torch.Tensor | None:
    """The call through the native path, or None where it does not serve it (arguments validated)."""
    grad = torch.is_grad_enabled() and (x.requires_grad or bias.requires_grad)
    needs = (x.requires_grad, bias.requires_grad) if grad else None
    outputs = _native.serve(_NATIVE_PLANS, (_key(x, bias, approximate), bias.stride(), needs),
                            lambda: _native_program(x, bias, approximate, needs), _ENTRIES[approximate], (x, bias),
                            graph=needs is not None)
    return None if outputs is None else outputs[0]


def _native_program(x, bias, approximate: str, needs: tuple[bool, bool] | None) -> object:
    if x.numel() == 0 or x.data_ptr() & 15 or bias.data_ptr() & 15:
        return _native.NOT_SERVED
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    launch, copied = _forward_launch(x, bias, out, approximate)
    if any(copied):
        return _native.NOT_SERVED
    forward = _native.Builder(2, like=(x, bias))
    xs, bs = forward.given
    outs = forward.empty(x.shape, x.dtype)
    try:
        forward.launch(launch, xs, bs, outs)
        if needs is None:
            return _native.program(forward, [outs])
        plan = _BackwardPlan(x, bias, approximate, out)  # out: a gradient in the output's layout
        if any(plan.copied):
            return _native.NOT_SERVED
        backward = _native.Builder(3)
        gx = backward.empty(x.shape, x.dtype)
        partials = backward.empty(plan.grads.partials_shape, torch.float64)
        backward.launch(plan.grads.launch, *backward.given, gx, partials)
        gb = None
        if needs[1]:
            gb = backward.empty(x.shape[-1:], x.dtype)
            backward.launch(plan.grads.finish, partials, gb)
    except _native.Unsupported:
        return _native.NOT_SERVED
    return _native.program(forward, [outs], saved=[xs, bs], backward=backward,
                           gradients=[gx if needs[0] else None, gb], grad_layouts=[forward.layout(outs)])


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``gelu(x + bias)``, ``approximate`` ``"none"`` (exact, erf) or ``"tanh"`` as in ``F.gelu``.

    x: ``(..., N)`` (``ndim >= 1``, any strides); bias: ``(N,)``; one dtype (float32, float16,
    bfloat16) on one device. Returns a new contiguous tensor of x's shape and dtype; differentiable
    in x and bias.

    Raises TypeError for a non-tensor or an unsupported or mismatched dtype; ValueError for a wrong
    shape or device or an unknown ``approximate``.
    """
    if not _ops.route():  # a signature seen before, the native path on: its program, run in C++
        entry = _ENTRIES.get(approximate) if type(approximate) is str else None
        out = entry.call(x, bias) if entry is not None else None
        if out is not None:
            return out
    _validate(x, bias, approximate)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return bias_gelu_op(x, bias, approximate)
    if _native.enabled():  # C++ host path (kernels/_native.py)
        out = _native_call(x, bias, approximate)
        if out is not None:
            return out
    if torch.is_grad_enabled() and (x.requires_grad or bias.requires_grad):
        return _BiasGelu.apply(x, bias, approximate)
    return _forward(x, bias, approximate)  # no graph to record: skip autograd's overhead
