"""Plumbing shared by row-wise kernels (softmax, elementwise-with-row-broadcast, norms).

A row-wise op sees its input as ``rows x N``: the last dimension is the row, every leading
dimension is folded into the row index. Two concerns live here so that each kernel module holds
only its math:

* **Layout** (:func:`row_layout`): fold the leading dimensions *without copying*. Any tensor whose
  last dimension is unit-stride and whose leading dimensions fold into at most two
  (size, stride) groups is passed as is; the kernel finds row ``r`` at
  ``(r // inner_rows) * stride_outer + (r % inner_rows) * stride_inner`` (see :func:`row_offset`).
  That covers contiguous tensors, row slices ``x[::2]``, column slices ``x[:, :k]``, expanded rows
  (stride 0), storage offsets and permutations of the leading dimensions of a 3-D tensor. Only a
  tensor whose last dimension is not unit-stride (``x.t()``, ``x[:, ::2]``), or whose leading
  dimensions need three or more groups, is copied with ``.contiguous()``: a strided row cannot be
  loaded with wide vector loads anyway, so the copy costs about what a strided kernel would.

* **Tiling** (:func:`row_tile`): how many columns one block covers (a power of two), how many rows
  one program handles and how many warps it gets. The widest row held in a single block depends on
  the backend (:func:`limits_for_backend`): on a GPU it is large (softmax holds rows of up to
  16384 elements in registers, so the common shapes take the single-pass path); under the CPU
  interpreter it is 64, so that CPU-sized test cases (rows of a few dozen to a few hundred
  elements) exercise the multi-block path and the several-rows-per-program path too.
  :func:`block_boundaries` lists the row lengths where the tiling changes, for test generators.

* **Accurate fp32 math** (:func:`exp`, :func:`div`): the GPU's native exp and fp32 division are a
  few ulp off, which fp32 outputs show against eager; kernels storing fp32 use these instead.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch
import triton
import triton.language as tl

from kernels import _tuning
from kernels._runtime import interpreting, small_tiles

# ----------------------------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------------------------
# Launch paths are kept lean: a small kernel on a fast GPU takes ~10 us, about what Python spends
# preparing a launch, so layout and tile decisions are memoised on (shape, strides) and (n, dtype
# size, limits), and plain tuples stand in for dataclasses.


class RowLayout(NamedTuple):
    """A tensor seen as ``rows x n`` with a unit-stride last dimension.

    ``tensor`` is what to hand the kernel as the base pointer: the caller's tensor itself, or a
    contiguous copy when ``copied`` is true. Row ``r`` starts ``(r // inner_rows) * stride_outer +
    (r % inner_rows) * stride_inner`` elements after ``tensor.data_ptr()``.

    Where the leading dimensions fold into one group (a 2-D tensor, a contiguous one, a single
    row), ``inner_rows`` is 1 and ``stride_outer`` the row stride: Triton specialises an integer
    argument equal to 1 as a constant, so the compiled kernel multiplies and never divides. The
    division is 64-bit, a routine of ~20 instructions a row on the GPU, run for every row a thread
    holds (16 in LayerNorm's 16-row tile): it costs the short-row norms more instructions than
    their arithmetic (with it, LayerNorm's forward at 65536 x 256 executes over twice
    torch.compile's instructions). A branch on a runtime flag instead slows LayerNorm's backward
    loop at rows of 4096 (docs/performance.md).
    """

    tensor: torch.Tensor
    rows: int
    n: int
    inner_rows: int
    stride_outer: int
    stride_inner: int
    copied: bool

    def kernel_args(self) -> tuple[int, int, int]:
        """The three integers :func:`row_offset` takes after the row indices."""
        return (self.inner_rows, self.stride_outer, self.stride_inner)


def _fold_leading(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[tuple[int, int]]:
    """Fold leading dims into (size, stride) groups, innermost first; size-1 dims are dropped."""
    groups: list[tuple[int, int]] = []
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if groups and stride == groups[-1][0] * groups[-1][1]:
            inner_size, inner_stride = groups[-1]
            groups[-1] = (inner_size * size, inner_stride)
        else:
            groups.append((size, stride))
    return groups


@functools.lru_cache(maxsize=4096)
def _layout_plan(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...] | None:
    """(rows, n, inner_rows, stride_outer, stride_inner), or None when a copy is needed;
    inner_rows 1 for one group (:class:`RowLayout`)."""
    n = shape[-1]
    rows = math.prod(shape[:-1])
    if rows == 0:  # nothing to address, and no copy would help: .contiguous() keeps an empty tensor's strides
        return (0, n, 1, 0, 0)
    if n > 1 and strides[-1] != 1:
        return None
    groups = _fold_leading(shape[:-1], strides[:-1])
    if len(groups) > 2:
        return None
    if not groups:  # a single row
        return (rows, n, 1, 0, 0)
    if len(groups) == 1:
        return (rows, n, 1, groups[0][1], 0)
    (inner_rows, stride_inner), (_, stride_outer) = groups
    return (rows, n, inner_rows, stride_outer, stride_inner)


def row_layout(t: torch.Tensor) -> RowLayout:
    """Describe ``t`` (shape ``(..., n)``, ``ndim >= 1``) as rows, copying only when unavoidable.

    Copies (``.contiguous()``) only when the last dimension is not unit-stride or the leading
    dimensions do not fold into two (size, stride) groups; ``copied`` says which happened.
    """
    plan = _layout_plan(t.shape, t.stride())
    if plan is not None:
        return RowLayout(t, *plan, False)
    t = t.contiguous()
    return RowLayout(t, *_layout_plan(t.shape, t.stride()), True)


def dense_layout(t: torch.Tensor) -> RowLayout:
    """The row layout of a contiguous tensor of ``t``'s shape, dtype and device (``t``'s own where
    it is contiguous; otherwise a fresh tensor's, aligned as fresh allocations are)."""
    if t.is_contiguous():
        return row_layout(t)
    return row_layout(torch.empty_like(t, memory_format=torch.contiguous_format))


def copying(launch: Callable[..., object], copied: tuple[bool, ...]) -> Callable[..., object]:
    """A bound launcher (``_launch.Kernel.bind``) for calls whose leading head arguments include
    row layouts that must be copied (``RowLayout.copied``, flagged in ``copied``): each call copies
    those (``.contiguous()``: fresh, so aligned as the copy the launcher was bound with) first."""
    if not any(copied):
        return launch
    count = len(copied)

    def call(*head):
        return launch(*[t.contiguous() if copy else t for t, copy in zip(head, copied)], *head[count:])
    return call


def nothing(*args: object) -> None:
    """The plan of an empty tensor: no launch."""


@triton.jit
def row_offset(rows, inner_rows, stride_outer, stride_inner):
    """Element offset (int64) of the start of each row in ``rows``; see :class:`RowLayout`."""
    r = rows.to(tl.int64)
    return (r // inner_rows) * stride_outer + (r % inner_rows) * stride_inner


# ---- the elementwise kernels' tiles -------------------------------------------------------------
# Each program covers ROWS rows x BLOCK columns. Values are loaded in the compute dtype: fp32, or
# fp64 with PRECISE (fp32 results), where sums of inputs such as x + bias are then exact: rounding
# such an argument to fp32 first moves an ill-conditioned activation by ulps of its result (gelu's
# tail: 2 ulp at z = -2.18), an error eager pays only where it is unlucky.


@triton.jit
def tile(ROWS: tl.constexpr, BLOCK: tl.constexpr, n_rows, n_cols):
    """(rows, cols, mask) of this program's tile, on the 1-D grid of :func:`tile_grid`.

    Consecutive programs take consecutive column blocks of a row tile, so the programs resident
    at once read and write one stretch of memory. Laid out the other way (row tiles first), they
    all start on the same column block of rows a row stride apart, and a wide forward (bias-GELU
    at 8192 x 16384 bf16) runs a few percent slower than a same-size copy, whatever the tile
    (docs/performance.md).
    """
    pid = tl.program_id(0)
    col_blocks = tl.cdiv(n_cols, BLOCK)
    rows = (pid // col_blocks) * ROWS + tl.arange(0, ROWS)
    cols = (pid % col_blocks) * BLOCK + tl.arange(0, BLOCK)
    return rows, cols, (rows < n_rows)[:, None] & (cols < n_cols)[None, :]


@triton.jit
def widen(v, PRECISE: tl.constexpr):
    """v in the compute dtype: fp64 with PRECISE, else fp32."""
    if PRECISE:
        return v.to(tl.float64)
    else:
        return v.to(tl.float32)


@triton.jit
def load_tile(ptr, rows, cols, mask, inner, stride_outer, stride_inner, PRECISE: tl.constexpr):
    """A [ROWS, BLOCK] tile of a row-strided tensor (0 where masked), in the compute dtype."""
    row = row_offset(rows, inner, stride_outer, stride_inner)[:, None]
    return widen(tl.load(ptr + row + cols[None, :], mask=mask, other=0.0), PRECISE)


@triton.jit
def load_vector(ptr, cols, n_cols, PRECISE: tl.constexpr):
    """A per-column vector (a bias) for the tile's columns, in the compute dtype."""
    return widen(tl.load(ptr + cols, mask=cols < n_cols, other=0.0), PRECISE)


@triton.jit
def across_rows(cols, ROWS: tl.constexpr):
    """Column offsets ``cols`` ([1, BLOCK]) repeated down the ROWS rows of a tile.

    A per-column vector (a weight, a bias) loaded through [1, BLOCK] offsets gets a layout of its
    own from Triton, sized for its BLOCK elements, and where the tile holds several rows Triton
    converts the whole tile to that layout through shared memory for the product, and back for
    the store: 27 barriers a program in LayerNorm's forward at 16 rows of 256 bf16 (sm_90 SASS).
    Loaded through the tile's [ROWS, BLOCK] offsets the vector takes the tile's layout; the
    compiler sees the rows repeat, so each thread still loads its columns once."""
    return cols + tl.full([ROWS, 1], 0, tl.int32)


@triton.jit
def dense_offsets(rows, cols, row_stride):
    """int64 offsets of the tile in a dense output of ``row_stride`` elements a row."""
    return rows.to(tl.int64)[:, None] * row_stride + cols[None, :]


# Accurate fp32 arithmetic for kernels whose results are stored as fp32 (``PRECISE``). On the GPU,
# Triton's fp32 ``/`` is div.full.f32 (up to 2 ulp) and tl.exp is ex2.approx(x * log2(e)), whose
# rounding of x * log2(e) costs |x| * 2^-24 of relative error (about 12 ulp at x = -20), where eager
# CUDA code divides exactly and calls expf (within 2 ulp). For fp16/bf16 results both errors are far
# below an output ulp, so those take the fast forms.
#
# exp (PRECISE, fp32, x <= 0): Cody-Waite reduction, e^x = 2^k * e^f with k = round(x / ln 2) and
# f = x - k ln 2 computed exactly in two steps (LN2_HI has few enough bits that k * LN2_HI is exact),
# so |f| <= ln(2)/2. k is read from the bits of x log2(e) + 1.5 * 2^23, whose low bits are k, and
# 2^k goes into the exponent bits with an integer add: no float-to-integer conversion, which on an
# H100 runs at 16 an SM a clock, an eighth of fp32 arithmetic (a floor and a conversion for k and
# two more for its powers of two made four an element; with the row sum's fifth they kept their
# pipe as busy as all of softmax's fp32 forward kept the issue, in the stretch where the SM's memory
# waits for the row's arithmetic). e^f is a degree-7
# Taylor polynomial (truncation error < 0.05 ulp) in Horner form whose coefficients carry 2^64:
# every step is the unscaled one times 2^64 exactly, and the result, in [2^63, 2^65), takes any k
# down to -150 (x clamped at -104, where e^x rounds to 0 anyway) into its exponent and stays
# normal; one product with 2^-64 then rounds it once, into fp32's subnormals where it must.
# Positive x is outside the contract: past x = 64 ln 2 (44.4) the exponent add overflows and the
# result is garbage (NaN, 0 or a negative number), not an infinity.
_LOG2E = tl.constexpr(1.4426950408889634)
_LN2_HI = tl.constexpr(0.693145751953125)  # 0x3F317200: low 8 mantissa bits zero
_LN2_LO = tl.constexpr(1.4286068203094173e-06)  # ln(2) - _LN2_HI
_ROUND_TO_INT_FP32 = tl.constexpr(12582912.0)  # 1.5 * 2^23
_EXP_TAYLOR = (1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0)
_T7, _T6, _T5, _T4, _T3, _T2, _T1, _T0 = (tl.constexpr(c * 2.0**64) for c in _EXP_TAYLOR)
_TWO_TO_MINUS_64 = tl.constexpr(2.0**-64)


@triton.jit
def exp(x, PRECISE: tl.constexpr):
    """e**x; with PRECISE and fp32 x <= 0, within about 1 ulp (tl.exp otherwise, any x).

    exp(-inf) = 0 and exp(NaN) = NaN. fp64 takes tl.exp, libdevice's exp, within an fp64 ulp
    (fp32 results' fp64 activations take :func:`exp_wide`). The PRECISE form is for x <= 0, as
    softmax's shifted logits are (see above).
    """
    if PRECISE and x.dtype == tl.float32:
        x = tl.where(x < -104.0, -104.0, x)  # NaN passes unchanged
        t = x * _LOG2E + _ROUND_TO_INT_FP32
        kf = t - _ROUND_TO_INT_FP32
        f = (x - kf * _LN2_HI) - kf * _LN2_LO
        p = tl.fma(f, _T7, _T6)
        p = tl.fma(p, f, _T5)
        p = tl.fma(p, f, _T4)
        p = tl.fma(p, f, _T3)
        p = tl.fma(p, f, _T2)
        p = tl.fma(p, f, _T1)
        p = tl.fma(p, f, _T0)
        # k << 23 is t's bits << 23 (1.5 * 2^23's low 9 bits are 0), wrapping as unsigned.
        bits = p.to(tl.uint32, bitcast=True) + (t.to(tl.uint32, bitcast=True) << 23)
        # x - x is 0, or NaN for a NaN x, whose bits the integer add does not keep.
        return bits.to(tl.float32, bitcast=True) * _TWO_TO_MINUS_64 + (x - x)
    else:
        return tl.exp(x)


# exp_wide: a reduction of the same kind in fp64, for the activations that run in fp64 because their
# results are fp32 (kernels/_activations.py). k = round(x / ln 2) comes from adding 1.5 * 2^52 (the
# sum's low mantissa bits are k, so the integer is read from its bits without a conversion, which
# runs at a quarter of the fp64 rate on an H100); f = x - k ln 2 in one fused step with one
# constant (|k| <= 1076, so the rounding of ln 2 to fp64 costs under 3e-14 of f); e^f a degree-7
# Chebyshev fit (relative error 5.5e-11 on |f| <= ln(2)/2; a degree-6 fit is about 2e-9). Its
# coefficients carry 2^-64, so that one power of two, 2^(k + 64), normal for every k down to -1076,
# scales the result in one product. In all about 1e-10: far below the fp32 half ulp (6e-8) its
# callers round to, in 11 fp64 operations where libdevice's exp (within an fp64 ulp) takes 16 and
# a branch for large arguments.
_ROUND_TO_INT_FP64 = tl.constexpr(6755399441055744.0)  # 1.5 * 2^52
_ROUND_TO_INT_FP64_BITS = tl.constexpr(0x4338000000000000)  # its bit pattern
_LN2 = tl.constexpr(0.6931471805599453)
_EXP_FIT = (0.00019907569310848288, 0.0013948578326459795, 0.008333283538708528, 0.041666218319291945,
            0.16666666786308587, 0.5000000107729166, 0.999999999995509, 0.9999999999595618)
_E7, _E6, _E5, _E4, _E3, _E2, _E1, _E0 = (tl.constexpr(c * 2.0**-64) for c in _EXP_FIT)


@triton.jit
def exp_wide(x):
    """e**x of fp64 ``x <= 0`` to about 1e-10 relative, for results rounded to fp32 (see above).

    exp(-inf) = 0 and exp(NaN) = NaN. Below -746 e^x rounds to 0 in fp64, and so does the clamped
    argument's value. Positive x is outside the contract (the callers pass -|z| and -z^2 / 2):
    nothing keeps 2^(k + 64) from overflowing there.
    """
    x = tl.where(x < -746.0, -746.0, x)
    t = x * _LOG2E + _ROUND_TO_INT_FP64
    kf = t - _ROUND_TO_INT_FP64
    k = t.to(tl.int64, bitcast=True) - _ROUND_TO_INT_FP64_BITS
    f = x - kf * _LN2
    p = f * _E7 + _E6
    p = p * f + _E5
    p = p * f + _E4
    p = p * f + _E3
    p = p * f + _E2
    p = p * f + _E1
    p = p * f + _E0
    return p * ((k + (1023 + 64)) << 52).to(tl.float64, bitcast=True)


@triton.jit
def div(a, b, PRECISE: tl.constexpr):
    """a / b, correctly rounded (IEEE) with PRECISE and fp32 operands; Triton's ``/`` otherwise."""
    if PRECISE and a.dtype == tl.float32:
        return tl.math.div_rn(a, b)
    else:
        return a / b


@triton.jit
def scale(e, factor):
    """e * factor rounded once to e's dtype, for fp32 e and an fp64 (or fp32) per-row factor.

    A softmax's final scaling multiplies every fp32 element by 1 / sum. With the sum in fp64 (the
    softmax forward's numerics before ``436cd23``, which ``benchmarks/tune_rows.py`` still times),
    widening each element to fp64 costs two conversions per element, and on an H100 conversions
    between fp32 and fp64 run at 16 per clock per SM, an eighth of fp32 arithmetic; at 128-wide rows
    that is what limits the kernel. Instead the factor is split once per row into fp32 hi + lo
    (hi + lo = factor to about 2^-48) and the product is ``fma(e, hi, e * lo)``: one rounding of
    e * hi + e * lo, whose error beyond the correctly rounded product is about 2^-47 relative.
    Any other dtype pair multiplies plainly.
    """
    if e.dtype == tl.float32 and factor.dtype == tl.float64:
        hi = factor.to(tl.float32)
        lo = (factor - hi.to(tl.float64)).to(tl.float32)
        return tl.fma(e, hi, e * lo)
    else:
        return e * factor


def launch_strides(t: torch.Tensor) -> tuple[int, ...]:
    """t's strides for a kernel launch, each size-1 dimension given the stride a contiguous tensor
    would have.

    A size-1 dimension may have any stride, and PyTorch often gives it 1 (a (1, 1, 1, 32) tensor
    made by permuting a (32, 1, 1, 1) one has strides (1, 1, 1, 1)). Triton specialises a stride
    of 1 as a constant, and with attention's seq and head_dim strides both 1 Triton 3.6
    miscompiles its backward (bf16, head_dim 32, seq 1: an out-of-bounds shared-memory read, which
    compute-sanitizer reports on every run). Only index 0 of a size-1 dimension is read, so no
    address a kernel uses changes. (flash_attention passes its strides through this; the other
    kernels' launches could too.)
    """
    strides, contiguous = [], 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride())):
        strides.append(stride if size != 1 else contiguous)
        contiguous *= max(size, 1)
    return tuple(reversed(strides))


_SAME_DEVICE = contextlib.nullcontext()


@functools.lru_cache(maxsize=1)
def _several_gpus() -> bool:
    return torch.cuda.device_count() > 1


def launch_guard(t: torch.Tensor):
    """Context for launching a kernel on ``t``'s device.

    On a GPU: make ``t``'s device the current one (Triton launches on the current device); a
    no-op with a single visible GPU. Under the interpreter: silence numpy's floating-point
    warnings, because the kernels rely on IEEE semantics (``-inf - -inf`` is NaN, ``exp(-inf)`` is
    0) exactly as the GPU does, silently; and the interpreter's max reduction (``np.nanmax``) warns
    on an all-NaN row through ``warnings``.
    """
    if t.device.type == "cuda":
        return torch.cuda.device(t.device) if _several_gpus() else _SAME_DEVICE
    return _quiet_numpy()


@contextlib.contextmanager
def _quiet_numpy():
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ----------------------------------------------------------------------------------------------
# Tiling
# ----------------------------------------------------------------------------------------------


class TileLimits(NamedTuple):
    """The knobs of :func:`row_tile` for one kernel family on one backend.

    max_block:     widest row (power of two) processed as one block; wider rows are split.
    split_block:   block width used once a row is split into several blocks.
    target_elems:  elements per program for short rows; rows per program = target_elems // block.
    max_rows:      cap on rows per program.
    thread_bytes:  bytes of input each thread should load (sets num_warps: enough work per thread
                   for wide vector loads, enough threads to keep memory requests in flight).
    max_warps:     cap on num_warps.
    """

    max_block: int
    split_block: int
    target_elems: int
    max_rows: int
    thread_bytes: int
    max_warps: int


class RowTile(NamedTuple):
    """One launch configuration: ``block`` columns x ``rows`` rows per tile.

    ``col_blocks`` is the number of blocks that cover a row: 1 means the row fits in one block.
    """

    block: int
    rows: int
    num_warps: int
    col_blocks: int


@functools.lru_cache(maxsize=1024)
def row_tile(n: int, elem_size: int, limits: TileLimits) -> RowTile:
    """Choose block width, rows per program and num_warps for rows of ``n`` elements."""
    width = triton.next_power_of_2(max(n, 1))
    if width <= limits.max_block:
        block, col_blocks = width, 1
    else:
        block, col_blocks = limits.split_block, triton.cdiv(n, limits.split_block)
    rows = max(1, min(limits.max_rows, limits.target_elems // block))
    threads = block * rows * elem_size // limits.thread_bytes
    num_warps = max(1, min(limits.max_warps, triton.next_power_of_2(max(threads // 32, 1))))
    return RowTile(block=block, rows=rows, num_warps=num_warps, col_blocks=col_blocks)


def even_tiles(n_rows: int, n: int, tile: RowTile, max_block: int | None = None) -> bool:
    """Whether every tile of rows of ``n`` is full, so that a kernel may build its masks as
    constants (which Triton folds away): one block a row, exactly ``n`` wide, whole row tiles, and
    the row at most ``max_block`` wide where a kernel measured that unmasking stops paying."""
    fits = max_block is None or n <= max_block
    return tile.col_blocks == 1 and tile.block == n and fits and n_rows % tile.rows == 0


def tile_grid(n_rows: int, tile: RowTile) -> tuple[int]:
    """The launch grid of kernels that take their tile from :func:`tile`: one program per row tile
    and column block, in one dimension (a grid's second dimension stops at 65535)."""
    return (triton.cdiv(n_rows, tile.rows) * tile.col_blocks,)


def block_boundaries(limits: TileLimits) -> tuple[int, ...]:
    """Row lengths where :func:`row_tile` changes behaviour, with their neighbours.

    1; the last length with several rows per program and the first with one; the single-block
    limit M (M-1, M, M+1); and, on the split path of block width S, M+S-1, M+S, M+S+1 (the last
    block one short of full, exactly full, one element over).
    """
    last_multi_row = limits.target_elems // 2 if limits.max_rows > 1 else 0
    m, s = limits.max_block, limits.split_block
    points = {1, last_multi_row, last_multi_row + 1, m - 1, m, m + 1, m + s - 1, m + s, m + s + 1}
    return tuple(sorted(p for p in points if p >= 1))


# Decided once: TRITON_INTERPRET is fixed before any kernel is decorated (see kernels/__init__.py).
_INTERPRETING = interpreting()
_SMALL_TILES = small_tiles()  # the kernels' one reading of the switch (read at import)


_ROUND_BF16_BY_HAND = tl.constexpr(_INTERPRETING)

# On a GPU, reciprocals of moderate values take the special-function unit's approximation: fp32 as
# is, fp64 refined (reciprocal_moderate).
_NATIVE_RCP = tl.constexpr(not _INTERPRETING)


@triton.jit
def reciprocal_moderate(b, PRECISE: tl.constexpr):
    """1 / b for b known to lie in [1, 2**126] (a sigmoid's 1 + e^-|z|, erfc's rational form).

    With PRECISE (fp64 b, the activations' fp32-result path) within about 1e-15 relative: on a GPU
    a refined ``rcp.approx.ftz.f64`` seed, in the interpreter an fp64 division. Otherwise, on a
    GPU, one ``rcp.approx.ftz.f32`` (within 1 ulp): Triton's ``/`` is ``div.full.f32``, whose fix-ups
    for subnormal and huge divisors cost seven more instructions an element on sm_90 (two compares,
    a select, three scalings and the product), and in gelu's erfc form those made the kernel
    compute-bound (47 instructions an element against a budget of ~45 at copy bandwidth for 16-bit
    data). In [1, 2**126] the fix-ups never apply, so the result is the same approximation. The
    interpreter runs no PTX and divides in numpy.
    """
    if PRECISE:
        tl.static_assert(b.dtype == tl.float64, "reciprocal_moderate: PRECISE takes fp64")
    if PRECISE and _NATIVE_RCP:
        # the hardware's seed, refined: three fma where IEEE division (div.rn.f64) takes nine fp64
        # operations and a slow-path call
        return refine_reciprocal(b, reciprocal_seed(b))
    elif not _NATIVE_RCP:
        return 1.0 / b
    else:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [b], dtype=tl.float32,
                                         is_pure=True, pack=1)


@triton.jit
def reciprocal_seed(b):
    """``rcp.approx.ftz.f64`` of fp64 ``b`` (MUFU.RCP64H and a few bits more): a coarse 1 / b for
    :func:`refine_reciprocal`. GPU only (inline PTX)."""
    return tl.inline_asm_elementwise("rcp.approx.ftz.f64 $0, $1;", "=d,d", [b], dtype=tl.float64,
                                     is_pure=True, pack=1)


@triton.jit
def refine_reciprocal(b, r):
    """1 / b from an approximation r of it: r (1 + e + e^2) with e = 1 - b r, whose own error is
    e^3 (b r' = 1 - e^3), so a seed within 2^-20 comes out within about 1e-16 (tested on the CPU
    with such a seed, and on the GPU with the hardware's: tests/unit/test_wide_math.py)."""
    e = 1.0 - b * r
    return r + r * (e * e + e)


@triton.jit
def cast_for_store(v, ptr):
    """``v`` converted to ``ptr``'s element type, rounded to nearest even, on every backend.

    The interpreter's fp32 -> bf16 cast truncates where a GPU rounds to nearest; a backward pass
    that starts from a truncated saved output can then miss by far more than an ulp (softmax on
    a peaked row: a stored 0.99609 instead of 1.0 made one gradient 100x off). Under the
    interpreter the rounding is therefore done on the bits first, so that the cast is exact; on a
    GPU this is the plain cast.
    """
    return cast_to(v, ptr.dtype.element_ty)


@triton.jit
def cast_to(v, dtype: tl.constexpr):
    """``v`` converted to ``dtype``, rounded to nearest even on every backend (see
    :func:`cast_for_store`; for stores through a tensor descriptor, whose ``dtype`` it takes)."""
    if _ROUND_BF16_BY_HAND and dtype == tl.bfloat16:
        bits = v.to(tl.float32).to(tl.uint32, bitcast=True)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return bits.to(tl.float32, bitcast=True).to(tl.bfloat16)
    else:
        return v.to(dtype)


def tiles_per_group(row_tiles: int, programs: int) -> int:
    """Row tiles each program walks when ``row_tiles`` tiles are shared among at most ``programs``
    programs (the backward kernels that reduce over rows: one partial row per program)."""
    return triton.cdiv(row_tiles, max(1, min(row_tiles, programs)))


def limits_for_backend(gpu: TileLimits, interpreter: TileLimits) -> TileLimits:
    """The GPU limits, or the small ones (``harness.validate.small_tiles``)."""
    return interpreter if _SMALL_TILES else gpu


# The elementwise kernels' forward tilings (add_mul_act, bias_gelu, glu), chosen by
# benchmarks/tune_rows.py elementwise and elementwise_fp32 on an H100, programs in column-block
# order (benchmarks/results/2026-11-24-h100-8). 16-bit rows: whole rows up to 1024 columns a
# block, 2048 elements a program, 32 bytes of input a thread (4 warps). Exact bias-GELU runs at
# about a same-size copy's time on it and is slower with 4096 elements a program; tanh bias-GELU
# and SwiGLU are level.
ELEMENTWISE_GPU_LIMITS = TileLimits(
    max_block=1024, split_block=1024, target_elems=2048, max_rows=64, thread_bytes=32, max_warps=8
)
# fp32 results evaluate their activations in fp64 (PRECISE), at half the fp32 lanes, and run
# fastest with programs of one 1024-wide row and 4 elements a thread (8 warps): tanh bias-GELU
# and SwiGLU (then in fp64) a tenth to a fifth faster than on the 16-bit tile, and GEGLU fastest
# on it too; add_mul_act's relu (only its sum in fp64, no fp64 activation) is level at every tile.
ELEMENTWISE_PRECISE_GPU_LIMITS = ELEMENTWISE_GPU_LIMITS._replace(target_elems=1024, thread_bytes=16)
# An fp32 forward whose arithmetic is fp32 (exact bias-GELU's and SwiGLU's values, eager's own
# fp32 forms) is bound by memory, not by the fp64 lanes: one 1024-wide row a program at 8
# elements a thread (4 warps) runs exact bias-GELU at 98% of a same-size copy, where the fp64
# tile's 8 warps reach 92% (benchmarks/results/2026-11-28-h100-22, 4096 x 16384 on an H100).
ELEMENTWISE_FP32_MATH_GPU_LIMITS = ELEMENTWISE_PRECISE_GPU_LIMITS._replace(thread_bytes=32)
# On an H200 exact bias-GELU's fp32 forward is bound by its arithmetic (CUDA's erfcf), not by the
# faster memory: two 1024-wide rows a program at 16 elements a thread (4 warps) ran 5.7-6.0%
# faster than the tile above at 4096 x 16384 and 16384 x 3072 (145.1 against 154.2 us, 109.8
# against 116.9), in two runs on two hosts (benchmarks/results/2026-11-28-h200-24 call 3,
# 2026-11-28-h200-26 call 3); SwiGLU's fp32 forward, on the same tile, was level (within 0.6%).
ELEMENTWISE_FP32_MATH_H200_LIMITS = ELEMENTWISE_FP32_MATH_GPU_LIMITS._replace(target_elems=2048, thread_bytes=64)
# Their backward kernels take 4096 elements a program (8 warps for 16-bit inputs): the grad_bias
# backwards' programs per SM are tuned on this tile (kernels/_activations.py); glu's backward, which
# has no such grid, is not swept.
ELEMENTWISE_BACKWARD_GPU_LIMITS = ELEMENTWISE_GPU_LIMITS._replace(target_elems=4096)
# What a sweep may vary (kernels/_tuning.py), with the choices above as defaults; and the grad_bias
# backwards' programs per SM, which a sweep may force (None: as many as an SM holds,
# kernels/_activations.py).
ELEMENTWISE = _tuning.Tuning(
    "elementwise", forward=ELEMENTWISE_GPU_LIMITS, fp32_forward=ELEMENTWISE_PRECISE_GPU_LIMITS,
    fp32_math_forward=ELEMENTWISE_FP32_MATH_GPU_LIMITS, backward=ELEMENTWISE_BACKWARD_GPU_LIMITS,
    backward_programs_per_sm=None, devices={"H200": {"fp32_math_forward": ELEMENTWISE_FP32_MATH_H200_LIMITS}},
)
# Under the interpreter: 64-wide blocks, so CPU-sized rows cross the single-block limit and the
# split path, and 4 rows per program for blocks of 64 (as the GPU's backward: 4 rows of 1024), so
# programs mask partial row tiles as on the GPU; each interpreted program costs milliseconds, and
# 4 rows a program make a CPU run 3-4x faster than 1. (The GPU's one-row fp32 forward tile takes
# the same code with ROWS = 1.)
ELEMENTWISE_INTERPRETER_LIMITS = TileLimits(
    max_block=64, split_block=64, target_elems=256, max_rows=8, thread_bytes=64, max_warps=4
)


def elementwise_limits(dtype: torch.dtype, backward: bool = False, fp64_math: bool = True) -> TileLimits:
    """The elementwise tiling of a forward (or ``backward``) kernel on ``dtype`` rows for the current
    backend (fp32 forwards, evaluated in fp64, have their own, and those whose arithmetic stays in
    fp32, ``fp64_math=False``, another; 16-bit forwards share one)."""
    if backward:
        gpu = ELEMENTWISE.backward
    elif dtype != torch.float32:
        gpu = ELEMENTWISE.forward
    else:
        gpu = ELEMENTWISE.fp32_forward if fp64_math else ELEMENTWISE.fp32_math_forward
    return limits_for_backend(gpu, ELEMENTWISE_INTERPRETER_LIMITS)


def elementwise_tile(n: int, dtype: torch.dtype, backward: bool = False, fp64_math: bool = True) -> RowTile:
    """The tile of an elementwise forward (or ``backward``) kernel on rows of ``n`` ``dtype``
    values, from :func:`elementwise_limits`."""
    return row_tile(n, dtype.itemsize, elementwise_limits(dtype, backward, fp64_math))


def elementwise_block_boundaries() -> tuple[int, ...]:
    """Row lengths where any elementwise tiling (forward, fp32 forward, backward) changes."""
    tilings = (elementwise_limits(torch.float16), elementwise_limits(torch.float32),
               elementwise_limits(torch.float32, fp64_math=False), elementwise_limits(torch.float16, backward=True))
    return tuple(sorted(set().union(*(block_boundaries(limits) for limits in tilings))))
