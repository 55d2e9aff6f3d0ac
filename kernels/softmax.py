"""Softmax over the last dimension: Triton forward and backward behind ``torch.autograd.Function``.

Forward: a row that fits one block (up to 32768 elements on a GPU, 16384 in fp64) is read once,
held in registers and written once: max, exp, sum and the division all happen on the loaded tile.
Short rows are packed several to a program so that each program still moves a few kilobytes;
where every tile is full, the loads and stores are unmasked (``_rows.even_tiles``). A longer row is
streamed in blocks twice: an online pass keeps a running max and a running sum rescaled whenever
the max grows, then a second pass writes ``exp(x - max) / sum``. The second pass walks the row
from its end back, so that it starts on the blocks the first pass read last, which are the most
likely to still sit in L2 (the backward's second pass does the same).

Backward: ``dx = y * dy - y * sum(y * dy)`` from the saved output (eager's formula), single pass
when the row fits a block, two passes (sums, then write) when it does not. For fp32/fp64 outputs
the sum is divided by ``sum(y)`` (1 in exact arithmetic) and the arithmetic is fp64: in a peaked
row the top element's gradient cancels, and the stored y's normalisation error (~1 ulp) would
otherwise dominate the small true gradient (an exact backward applied to eager's own fp32 output
misses eager's error budget by 4-14x on such rows; normalised, the kernel stays within ~1.4x).
For fp16/bf16 the rounding error of y sits in single elements, which normalising does not model;
there the kernel keeps eager's formula in fp32, so that on the same y it reproduces eager's answer.
An fp32 row too wide for the fp64 single pass (past 16384 elements on a GPU, where the fp64 sums
spill) and at most 32768 wide is still read once, with fp32 sums and arithmetic (as eager's),
normalised by sum(y) as the fp64 path is: torch.compile's one-pass speed, where the two-pass fp64
path re-reads the row from HBM. Wider rows stream twice with fp64 sums.

Numerics: element arithmetic in fp32 (fp64 for fp64 inputs), results stored in the input dtype.
The forward of fp32, fp16 and bf16 rows takes the GPU's fast exp (``tl.exp``: ``ex2.approx`` of a
product with log2 e, the arithmetic of Triton's tutorial and of Liger-Kernel), sums the row in
fp32, divides 1 by the sum once with IEEE rounding and scales each element by it. In fp32 results
the fast exp shows in the tails (2 + 1.173 |x - max| ulps at most, CUDA's documented bound), which
the spec declares (``approximate_math``) so that the harness holds each element to that bound
rather than to eager's libdevice exp; the backward, which reads y, is held to the same bounds
carried through its formula. A 32768-wide fp32 row fills an SM's registers, so each SM works on one
row at a time and its arithmetic is exposed: fp64 sums and an accurate exp cost 11% there (289
against 259 us at 4096x32768 on an H200, a same-size copy 253). fp64 rows take libdevice's exp and
divide. Special values follow
``torch.softmax``: ``-inf`` entries give exactly 0, and a row that is entirely ``-inf``, or holds a
``+inf`` or a NaN, comes out all NaN (in every case the row's sum becomes NaN, so every element is
NaN, whatever the max reduction does with NaN).

No atomics and a fixed reduction order: repeated calls are bitwise identical.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from kernels import _launch, _native, _ops, _rows, _tuning
from kernels._validate import FLOAT_DTYPES, check_tensor

OP = "softmax"
DTYPES = FLOAT_DTYPES + (torch.float64,)

# GPU tiling, chosen by benchmarks/tune_rows.py softmax on an H100 (benchmarks/results/2026-11-23-h100-4).
# The forward holds rows of up to 32768 elements in registers (a 32K fp32 row takes a fifth less
# time in one pass than streamed twice); fp64 rows stop at half that (_BLOCK_BYTES). The backward
# holds two arrays a row, so it splits past 16384 (a 32K single block spills and runs eight times
# slower), and wants more threads per row (16 bytes a thread). Short rows: 1024 elements a program
# (128-wide fp32 rows: slightly faster than 2048).
_GPU_FWD = _rows.TileLimits(
    max_block=32768, split_block=4096, target_elems=1024, max_rows=16, thread_bytes=32, max_warps=32
)
_GPU_BWD = _rows.TileLimits(
    max_block=16384, split_block=4096, target_elems=1024, max_rows=16, thread_bytes=16, max_warps=32
)
# fp32 rows past the backward's single-block limit, up to this wide, are read once in fp32 (below):
# at 4096 x 32768 on an H200 (benchmarks/results/2026-11-28-h200-23) the split backward with fp64
# sums took 527 us, re-reading each row from HBM, against 384-393 us for torch.compile's one pass;
# one fp32 pass of 8 warps took 391 us (407 at 16 warps, 437 at 32), 413 us with its sums
# normalised by sum(y) as shipped.
_GPU_FP32_ONE_PASS = (32768, 8)  # (widest row, num_warps)
# What a sweep may vary (kernels/_tuning.py), with the choices above as defaults.
TUNING = _tuning.Tuning("softmax", forward=_GPU_FWD, backward=_GPU_BWD, fp32_one_pass=_GPU_FP32_ONE_PASS)
_BLOCK_BYTES = 32768 * 4  # of compute-dtype values in one single-block row
_INTERPRETER_LIMITS = _rows.TileLimits(
    max_block=64, split_block=64, target_elems=64, max_rows=8, thread_bytes=32, max_warps=4
)
_INTERPRETER_FP32_ONE_PASS = (128, 4)


def _limits(backward: bool) -> _rows.TileLimits:
    return _rows.limits_for_backend(TUNING.backward if backward else TUNING.forward, _INTERPRETER_LIMITS)


def _fp32_one_pass() -> tuple[int, int]:
    return _rows.limits_for_backend(TUNING.fp32_one_pass, _INTERPRETER_FP32_ONE_PASS)


def block_boundaries() -> tuple[int, ...]:
    """Row lengths where the forward's or the backward's tiling changes on the current backend
    (for test shapes): the fp32 backward's one-pass limit and its neighbours among them."""
    widest = _fp32_one_pass()[0]
    return tuple(sorted(set(_rows.block_boundaries(_limits(False))) | set(_rows.block_boundaries(_limits(True)))
                        | {widest - 1, widest, widest + 1}))


@functools.lru_cache(maxsize=1024)
def _config(n: int, dtype: torch.dtype, backward: bool) -> tuple[_rows.RowTile, dict]:
    """(tile, launch keywords) for rows of n elements of this dtype, for the forward or the
    backward kernel.

    COMPUTE: element arithmetic (fp32; fp64 for fp64). ACC, the row sums and per-row scalars: fp32
    in the forward (fp64 for fp64 rows); in the backward fp64 for fp32 and fp64 rows (WIDE, which
    also normalises by sum(y); fp32 for the fp32 rows read in one pass past the backward's block,
    below), fp32 for fp16/bf16 (eager's formula; see the module docstring).
    PRECISE: the fp32 backward's reciprocal of an fp64 sum (``_reciprocal``); in the forward,
    which production runs without it, it would also pick the accurate exp (``_rows.exp``:
    ``benchmarks/tune_rows.py`` times the forward's numerics before ``436cd23`` so).
    """
    limits = _limits(backward)
    compute_size = 8 if dtype == torch.float64 else 4
    limits = limits._replace(max_block=min(limits.max_block, max(limits.split_block, _BLOCK_BYTES // compute_size)))
    tile = _rows.row_tile(n, dtype.itemsize, limits)
    wide = dtype in (torch.float32, torch.float64)
    # The forward's sums are fp32 (fp64 for fp64 rows); the backward's are fp64 for fp32 rows too.
    acc = tl.float64 if dtype == torch.float64 or (wide and backward) else tl.float32
    widest, warps = _fp32_one_pass()
    if backward and dtype == torch.float32 and tile.col_blocks > 1 and n <= widest:
        # one pass with fp32 sums (module docstring): fp64 sums over a row this wide spill
        tile, acc = _rows.RowTile(block=triton.next_power_of_2(n), rows=1, num_warps=warps, col_blocks=1), tl.float32
    return tile, dict(
        BLOCK=tile.block, ROWS=tile.rows, SPLIT=tile.col_blocks > 1,
        COMPUTE=tl.float64 if dtype == torch.float64 else tl.float32,
        ACC=acc, WIDE=wide, PRECISE=backward and dtype == torch.float32, num_warps=tile.num_warps,
    )


TUNING.forget_with(_config.cache_clear)


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def _reciprocal(total, PRECISE: tl.constexpr):
    """1 / a row's sum: of exponentials in the forward, in [1, n] (the maximum's own term is 1),
    and of y in the backward, about 1. An fp64 sum of the fp32 backward takes
    ``_rows.reciprocal_moderate`` (a refined hardware seed, ~1e-15, far finer than what fp32 results
    round to, without IEEE division's slow-path call); an fp32 sum is divided with IEEE rounding
    (``div_rn``: once a row, so its cost does not show, and half an ulp where Triton's ``/`` takes
    up to two); any other fp64 sum (fp64 results) divides."""
    if PRECISE and total.dtype == tl.float64:
        return _rows.reciprocal_moderate(total, True)
    elif total.dtype == tl.float32:
        return tl.div_rn(1.0, total)
    else:
        return 1.0 / total


@_launch.jit
def _softmax_fwd_kernel(
    x_ptr, y_ptr, n_rows, n_cols, x_inner_rows, x_stride_outer, x_stride_inner,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, SPLIT: tl.constexpr, COMPUTE: tl.constexpr,
    ACC: tl.constexpr, PRECISE: tl.constexpr, WIDE: tl.constexpr,  # WIDE: backward only
    EVEN: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = (rows < n_rows)[:, None]
    x_row = x_ptr + _rows.row_offset(rows, x_inner_rows, x_stride_outer, x_stride_inner)[:, None]
    y_row = y_ptr + rows.to(tl.int64)[:, None] * n_cols
    cols = tl.arange(0, BLOCK)[None, :]
    neg_inf = -float("inf")
    if not SPLIT:
        if EVEN:  # every tile full (_rows.even_tiles, any row width): a constant mask, folded away
            mask = tl.full([ROWS, BLOCK], True, tl.int1)
        else:
            mask = row_ok & (cols < n_cols)
        x = tl.load(x_row + cols, mask=mask, other=neg_inf).to(COMPUTE)
        # One row of 32K fp32 elements fills the registers: e stays in COMPUTE, and y is e times
        # one reciprocal per row (the forward's PRECISE is False: the fast exp, and for fp32 an
        # fp32 sum; _rows.scale multiplies plainly then).
        e = _rows.exp(x - tl.max(x, axis=1)[:, None], PRECISE)
        inv = _reciprocal(tl.sum(e.to(ACC), axis=1), PRECISE)
        y = _rows.scale(e, inv[:, None])
        tl.store(y_row + cols, _rows.cast_for_store(y, y_ptr), mask=mask)
    else:
        # Online pass: running max m and sum s of exp(x - m). While a row has seen only -inf,
        # rescale against 0 instead of m so that -inf - -inf never makes a NaN out of nothing.
        m = tl.full([ROWS], neg_inf, COMPUTE)
        s = tl.zeros([ROWS], ACC)
        for start in range(0, n_cols, BLOCK):
            mask = row_ok & (start + cols < n_cols)
            x = tl.load(x_row + start + cols, mask=mask, other=neg_inf).to(COMPUTE)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            ref = tl.where(m_new == neg_inf, 0.0, m_new)
            e = _rows.exp(x - ref[:, None], PRECISE).to(ACC)
            s = s * _rows.exp(m - ref, PRECISE).to(ACC) + tl.sum(e, axis=1)
            m = m_new
        inv = _reciprocal(s, PRECISE)[:, None]
        # Second pass from the row's end back: the blocks read last are still in L2 (see the
        # module docstring).
        n_blocks = tl.cdiv(n_cols, BLOCK)
        for i in range(0, n_blocks):
            start = (n_blocks - 1 - i) * BLOCK
            mask = row_ok & (start + cols < n_cols)
            x = tl.load(x_row + start + cols, mask=mask, other=neg_inf).to(COMPUTE)
            y = _rows.scale(_rows.exp(x - m[:, None], PRECISE), inv)
            tl.store(y_row + start + cols, _rows.cast_for_store(y, y_ptr), mask=mask)


@_launch.jit
def _softmax_bwd_kernel(
    y_ptr, dy_ptr, dx_ptr, n_rows, n_cols, dy_inner_rows, dy_stride_outer, dy_stride_inner,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, SPLIT: tl.constexpr, COMPUTE: tl.constexpr,
    ACC: tl.constexpr, PRECISE: tl.constexpr, WIDE: tl.constexpr,
):
    # y and dx are contiguous (y is this module's own output); dy may have any row layout.
    # dx = y * dy - y * c, c = sum(y * dy) [/ sum(y) when WIDE]: see the module docstring.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = (rows < n_rows)[:, None]
    dense_row = rows.to(tl.int64)[:, None] * n_cols
    y_row = y_ptr + dense_row
    dx_row = dx_ptr + dense_row
    dy_row = dy_ptr + _rows.row_offset(rows, dy_inner_rows, dy_stride_outer, dy_stride_inner)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    if not SPLIT:
        mask = row_ok & (cols < n_cols)
        y = tl.load(y_row + cols, mask=mask, other=0.0).to(ACC)
        dy = tl.load(dy_row + cols, mask=mask, other=0.0).to(ACC)
        c = tl.sum(y * dy, axis=1)
        if WIDE:
            c = c * _reciprocal(tl.sum(y, axis=1), PRECISE)
        dx = y * dy - y * c[:, None]
        tl.store(dx_row + cols, _rows.cast_for_store(dx, dx_ptr), mask=mask)
    else:
        dot = tl.zeros([ROWS, BLOCK], ACC)
        total = tl.zeros([ROWS, BLOCK], ACC)
        for start in range(0, n_cols, BLOCK):
            mask = row_ok & (start + cols < n_cols)
            y = tl.load(y_row + start + cols, mask=mask, other=0.0).to(ACC)
            dy = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(ACC)
            dot += y * dy
            if WIDE:
                total += y
        c = tl.sum(dot, axis=1)
        if WIDE:
            c = c * _reciprocal(tl.sum(total, axis=1), PRECISE)
        c = c[:, None]
        n_blocks = tl.cdiv(n_cols, BLOCK)
        for i in range(0, n_blocks):  # backwards, as in the forward's second pass
            start = (n_blocks - 1 - i) * BLOCK
            mask = row_ok & (start + cols < n_cols)
            y = tl.load(y_row + start + cols, mask=mask, other=0.0).to(ACC)
            dy = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(ACC)
            tl.store(dx_row + start + cols, _rows.cast_for_store(y * dy - y * c, dx_ptr), mask=mask)


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


# A call's host work is one dictionary lookup: each direction keeps a plan per input layout (shape,
# strides, dtype, device, 16-byte alignment: all that decides the grid, the tile and Triton's
# specialisation), a bound launcher (``_launch.Kernel.bind``) that takes the call's tensors. A
# layout that must be copied to be read as rows is copied on every call, before the launch.
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()


def _forward(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0)
    plan = _FORWARD_PLANS.get(key) or _launch.remember(_FORWARD_PLANS, key, _forward_plan(x, y))
    plan(x, y)
    return y


def _forward_plan(x: torch.Tensor, y: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], object]:
    """What a forward call on x's layout runs: ``plan(x, y)`` writes softmax(x) into y."""
    if y.numel() == 0:
        return _rows.nothing
    src = _rows.row_layout(x)
    grid, config = _forward_launch(src, x.dtype)
    launch = _softmax_fwd_kernel.bind(grid, (src.tensor, y, src.rows, src.n, *src.kernel_args()), config, runtime=2)
    return _rows.copying(launch, (src.copied,))


def _forward_launch(src: _rows.RowLayout, dtype: torch.dtype) -> tuple[tuple[int], dict]:
    """The forward kernel's grid and launch keywords for rows laid out as ``src``: :func:`_config`'s,
    and EVEN where every tile is full (``_rows.even_tiles``)."""
    tile, config = _config(src.n, dtype, False)
    return (triton.cdiv(src.rows, tile.rows),), {**config, "EVEN": _rows.even_tiles(src.rows, src.n, tile)}


def _backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    dx = torch.empty_like(y, memory_format=torch.contiguous_format)
    key = (dy.shape, dy.stride(), y.dtype, y.device, dy.data_ptr() & 15 == 0)  # y: the forward's own output
    plan = _BACKWARD_PLANS.get(key) or _launch.remember(_BACKWARD_PLANS, key, _backward_plan(y, dy, dx))
    plan(y, dy, dx)
    return dx


def _backward_plan(y: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor) -> Callable[..., object]:
    """What a backward call on dy's layout runs: ``plan(y, dy, dx)`` writes the gradient into dx."""
    if dx.numel() == 0:
        return _rows.nothing
    grad = _rows.row_layout(dy)
    tile, config = _config(grad.n, y.dtype, True)
    launch = _softmax_bwd_kernel.bind(
        (triton.cdiv(grad.rows, tile.rows),), (y, grad.tensor, dx, grad.rows, grad.n, *grad.kernel_args()), config,
        runtime=3,
    )
    return _rows.copying(launch, (False, grad.copied))


# The native path (kernels/_native.py): one program per layout that is read in place, with its
# backward where x needs a gradient; the same kernels, tiles and arguments as the plans above.
_NATIVE_PLANS = _launch.plan_table()
# The entry point's first step (``_native.Entry``): ``_ENTRY.call(x)`` runs a recorded signature's
# program with no Python, or returns None.
_ENTRY = _native.Entry(1)


def _native_program(x: torch.Tensor, grad: bool) -> object:
    src = _rows.row_layout(x)
    if x.numel() == 0 or x.data_ptr() & 15 or src.copied:
        return _native.NOT_SERVED
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    grid, config = _forward_launch(src, x.dtype)
    forward = _native.Builder(1, like=(x,))
    (xs,) = forward.given
    ys = forward.empty(x.shape, x.dtype)
    try:
        forward.launch(_softmax_fwd_kernel.bind(grid, (x, y, src.rows, src.n, *src.kernel_args()), config, runtime=2),
                       xs, ys)
        if not grad:
            return _native.program(forward, [ys])
        dy, dx = torch.empty_like(y), torch.empty_like(y)
        rows = _rows.row_layout(dy)
        tile, config = _config(rows.n, x.dtype, True)
        backward = _native.Builder(2)
        y_saved, dys = backward.given
        dxs = backward.empty(x.shape, x.dtype)
        backward.launch(_softmax_bwd_kernel.bind((triton.cdiv(rows.rows, tile.rows),),
                                                 (y, dy, dx, rows.rows, rows.n, *rows.kernel_args()), config,
                                                 runtime=3), y_saved, dys, dxs)
    except _native.Unsupported:
        return _native.NOT_SERVED
    return _native.program(forward, [ys], saved=[ys], backward=backward, gradients=[dxs],
                           grad_layouts=[forward.layout(ys)])


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = _forward(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        if dy.dtype != y.dtype:  # autograd may hand a grad of another dtype; never mutate it
            dy = dy.to(y.dtype)
        return _backward(y, dy)


@_ops.op("softmax", "(Tensor x) -> Tensor")
def softmax_op(x):
    """The custom op (kernels/_ops.py): y, which is also what its backward reads."""
    return _forward(x)


@softmax_op.register_fake
def _(x):
    return _ops.empty_like(x)


@_ops.op("softmax_backward", "(Tensor y, Tensor dy) -> Tensor")
def softmax_backward_op(y, dy):
    """The backward kernel as an op: dx from the forward's y and the output gradient."""
    return _backward(y, dy)


@softmax_backward_op.register_fake
def _(y, dy):
    return _ops.empty_like(y)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _backward_formula(ctx, dy):
    (y,) = ctx.saved_tensors
    return softmax_backward_op(y, dy.to(y.dtype))


softmax_op.register_autograd(_backward_formula, setup_context=_setup)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.softmax(x, dim=-1)`` for a tensor of one or more dimensions.

    dtypes: float32, float16, bfloat16 (fp32 arithmetic) and float64 (fp64 arithmetic). Any strides.
    Returns a new contiguous tensor of ``x``'s shape and dtype; differentiable.

    Raises TypeError for a non-tensor or an unsupported dtype, ValueError for a 0-d tensor or a
    tensor on the wrong device.
    """
    if not _ops.route():  # a signature seen before, the native path on: its program, run in C++
        y = _ENTRY.call(x)
        if y is not None:
            return y
    check_tensor(OP, "x", x, dtypes=DTYPES, min_ndim=1)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return softmax_op(x)
    grad = x.requires_grad and torch.is_grad_enabled()
    if _native.enabled():  # C++ host path (kernels/_native.py)
        key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, grad)
        outputs = _native.serve(_NATIVE_PLANS, key, lambda: _native_program(x, grad), _ENTRY, (x,), graph=grad)
        if outputs is not None:
            return outputs[0]
    if grad:
        return _Softmax.apply(x)
    return _forward(x)  # no graph to record: skip autograd.Function's overhead
