"""Shared machinery of the normalisation kernels: LayerNorm, RMSNorm and dropout-add-norm.

The three ops differ only in where a row comes from and in which statistics they take, so one
forward kernel and one backward kernel serve all of them, specialised by ``tl.constexpr`` flags
(each op compiles only its own variant):

* **The row source.** LayerNorm and RMSNorm read ``x``. Dropout-add-norm builds the row it
  normalises, ``s = dropout(x + bias, p) + residual``, in registers; ``s`` is rounded to the input
  dtype before its statistics are taken (as the eager composite does, and so that the stored
  prenorm sum, the output and the backward all see the same ``s``).
* **The statistics** (:func:`_stats_init`, :func:`_stats_add`, :func:`_stats_finish`), one helper
  for all three ops, in the arithmetic dtype (below). RMSNorm takes ``mean(s^2)``. LayerNorm
  shifts every row by its first element ``K`` before summing: ``mean = K + m`` with ``m`` the
  mean of ``s - K``, and the variance is the mean square of ``(s - K) - m``. A constant row then
  normalises to exactly ``bias`` (``s - K`` is exactly 0), and a row whose mean is far larger
  than its spread keeps its accuracy (the rounding error of ``m`` scales with the spread, not
  with ``|mean|``). Rows wider than one block are streamed: each block's mean and squared
  deviations are combined with Chan's parallel formula, which never subtracts two large sums, and
  the running mean carries its rounding (TwoSum). In fp32 arithmetic a block of REFINE_MIN_BLOCK
  columns or more refines its mean with the mean of its deviations: the shift leaves a zero-mean
  row's sum biased by K, and its fp32 sum was ulps of K off (:func:`_block_mean`).
* **Dropout** (:func:`keep_mask`): a counter-based Philox stream, one ``tl.philox`` call per four
  columns, counters ``(column // 4, row)``, key = the seed. The mask depends only on the seed and
  the element's logical position (not on strides, tiling or the backend), so the backward
  regenerates it instead of reading a stored mask. An element is kept when 31 random bits are
  ``>= round(p * 2^31)``: p = 0 keeps everything exactly, p = 1 nothing.

Forward (:func:`forward`): a row that fits one block (up to 16384 columns on a GPU) is read once,
held in registers and written once; the statistics of each row (``K``, ``m``, ``rstd``) are stored
for the backward (3 values a row in the statistics' dtype), unless no backward will read them
(``store_stats``). Several short rows share a program; where every tile is full and the rows are
short, the kernel masks nothing (:func:`even_tiles`). Weight, bias and xbias load through the
tile's own [ROWS, BLOCK] offsets (``_rows.across_rows``), so that Triton keeps the tile in one
layout instead of moving it through shared memory. A wider row is streamed twice: statistics,
then normalisation (re-reading ``x``, or the stored ``s`` for dropout-add-norm).

Backward (:func:`backward`): one pass over rows that fit one block. Each program walks a fixed
group of row tiles and keeps the weight/bias gradient contributions (``dy * xhat``, ``dy``, and for
dropout-add-norm the gradient of the dropped input's bias) in registers; it writes one partial row
per group, and a small kernel (:func:`_sum_partials_kernel`) adds the partials of all groups in a
fixed order. No atomics: results are bitwise reproducible. The partials are fp64 for fp32/fp64
inputs (the sums of many rows then add no error of their own) and fp32 for fp16/bf16. A row wider
than one block is cut into column blocks, and two kernels share the work:
:func:`_norm_bwd_row_sums_kernel` writes each row's sums of ``g * xhat`` and ``g`` per column
block (one program per row tile and column block), then the backward kernel runs one program per
row group and column block and takes the row means ``c1``, ``c2`` from those sums (added in a
fixed order). s and dy are read twice, but every program streams independent tiles and the
partial rows are as few as the row groups. An earlier two-pass loop per row tile kept a
full-width partial row per group in L2 and walked its tiles one after another: forward+backward
at 1024 x 16384 bf16 took 0.1420 ms (LayerNorm) and 0.2950 (dropout-add-LayerNorm), against 0.1047
and 0.1579 now (results/2026-11-24-h100-7).

Numerics: arithmetic in fp32 for fp16/bf16 inputs and in fp64 for fp32 and fp64 inputs
(``WIDE_FP32``, below), results stored in the input dtype. With ``WIDE_FP32 = False`` fp32 rows
compute in fp32 with correctly rounded divisions and ``sqrt_rn`` (Triton's defaults are
approximate on a GPU, which an fp32 output shows); fp16/bf16 results take the fast forms.
"""

from __future__ import annotations

import functools
import struct
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from kernels import _launch, _rows
from kernels._runtime import sm_count
from kernels._validate import FLOAT_DTYPES, check_finite_scalar, check_same_device, check_same_dtype, check_shape, check_tensor

DTYPES = FLOAT_DTYPES + (torch.float64,)

# ----------------------------------------------------------------------------------------------
# Tiling
# ----------------------------------------------------------------------------------------------
# GPU forward: rows up to 16384 columns stay in registers (one read, one write); a row of 16384 in
# fp32 registers plus the weight and bias blocks use 192 KB of the 256 KB register file at 32
# warps, so that is the ceiling. target_elems sets how many short rows share a program
# (dropout-add-norm takes fewer: _GPU_FWD_DROPOUT below). 64 bytes
# of input a thread (half the warps of 32): fewer warps make the row reductions cheaper, and the
# H100 sweep (benchmarks/tune_rows.py) measured LayerNorm's forward 4-20% faster with it
# (1024x16384 bf16: 0.033 ms against 0.041), RMSNorm's within 1%.
# GPU backward: each program holds s, dy and the fp32 gradient accumulators of its block, four
# arrays of BLOCK, so its single-block limit is 8192. Wider rows are cut into column blocks of
# split_block (the row-sums kernel, then the column kernel: see the module docstring), with the
# rows and threads of _GPU_BWD_COLUMNS below.
# Interpreter: blocks of 64 so that CPU-sized rows (up to ~150 columns) exercise the multi-block
# paths. The interpreter's cost is per operation executed, nearly flat in the tile size, so the
# forward packs 16 rows per program (measured: 20 rows of 129 in 160 ms instead of 410 ms with 4
# rows per program). The backward keeps 4 rows per tile so that CPU cases of a few rows already
# span several tiles and several row groups (the partials reduction), and rows of over 64 columns
# take the column kernels.
_GPU_FWD = _rows.TileLimits(max_block=16384, split_block=4096, target_elems=4096, max_rows=16, thread_bytes=64, max_warps=32)
_GPU_BWD = _rows.TileLimits(max_block=8192, split_block=1024, target_elems=4096, max_rows=16, thread_bytes=32, max_warps=16)
_INTERPRETER_FWD = _rows.TileLimits(max_block=64, split_block=64, target_elems=1024, max_rows=16, thread_bytes=32, max_warps=4)
_INTERPRETER_BWD = _rows.TileLimits(max_block=64, split_block=64, target_elems=256, max_rows=4, thread_bytes=32, max_warps=4)
# Backward row groups: on a GPU, this many programs per SM (each loops over its group's tiles);
# under the interpreter two tiles per group, so that small cases already produce several partials.
# The H100 sweep (tune_rows.py norm_backward_groups; results/2026-11-24-h100-3, calls 2-4) found 2
# fastest at 9 of 10 shapes, and 4 or 8 programs 14-83% slower. Neither the partials reduction
# (summed by torch instead: no faster) nor the loop's pipelining depth (num_stages 1-5: within 1%)
# explains that. Rows cut into column blocks take 4 an SM, shared among their column blocks
# (_GPU_BWD_COLUMN_PROGRAMS_PER_SM, below).
# BWD_PROGRAMS_PER_SM forces a count (a sweep's knob: tune_rows.py norm_backward_groups and
# norm_backward_columns).
_GPU_BWD_PROGRAMS_PER_SM = 2
_GPU_BWD_COLUMN_PROGRAMS_PER_SM = 4
BWD_PROGRAMS_PER_SM: int | None = None
# Prefetch: a program loads its next row tile before the arithmetic of this one, so that two
# tiles' loads are in flight (the GPU rule below prefetches only rows within one block; the
# interpreter runs it in column blocks too); Triton does not pipeline this loop itself
# (num_stages made no difference). It holds two tiles' inputs in registers, which helps some
# shapes and hurts others, so the measured rule (_bwd_prefetch) decides. BWD_PREFETCH True or
# False forces it (a sweep's knob: tune_rows.py norm_backward_groups, norm_backward_prefetch).
BWD_PREFETCH: bool | None = None
# BWD_COLUMNS_FROM: the narrowest row block that takes the column kernels (a sweep's knob:
# tune_rows.py norm_backward_columns_from); None: rows wider than _GPU_BWD.max_block.
BWD_COLUMNS_FROM: int | None = None
_INTERPRETER_TILES_PER_GROUP = 2
# The partials reduction: GROUP_TILE group rows x PART_BLOCK columns per step.
_GPU_PART = (32, 128)
_INTERPRETER_PART = (4, 64)
# Dropout draws four columns per Philox call, so a block is at least 4 wide.
_MIN_DROPOUT_BLOCK = 4


def _fwd_limits() -> _rows.TileLimits:
    return _rows.limits_for_backend(_GPU_FWD, _INTERPRETER_FWD)


def _bwd_limits() -> _rows.TileLimits:
    return _rows.limits_for_backend(_GPU_BWD, _INTERPRETER_BWD)


def block_boundaries() -> tuple[int, ...]:
    """Row lengths where the forward or backward tiling changes on this backend (test sizes),
    the GPU's per-shape overrides (below) included."""
    points = set(_rows.block_boundaries(_fwd_limits())) | set(_rows.block_boundaries(_bwd_limits()))
    if not _rows._SMALL_TILES:
        for limits in (_GPU_FWD_DROPOUT, _GPU_BWD_COLUMNS, _GPU_BWD_NARROW16,
                       *(_dropout_bwd_limits(size) for size in (2, 4, 8))):
            points |= set(_rows.block_boundaries(limits))
        for low, high in (_NARROW16, _PREFETCH_RMS16, (_DROPOUT_FP32_BLOCK, _DROPOUT_FP32_BLOCK)):
            # row blocks low..high: rows of low // 2 + 1 to high columns
            points |= {low // 2, low // 2 + 1, high, high + 1}
    return tuple(sorted(points))


# GPU overrides: measured exceptions to the shared limits above (OVERRIDES switches them all; the
# column kernels' _GPU_BWD_COLUMNS below is not one: rows wider than a block always take it, and
# tune_rows.py norm_backward_columns varies it).
# Backward, from the H100 sweeps of the backward alone (benchmarks/tune_rows.py norm_backward;
# results/2026-11-24-h100-2/call7), for LayerNorm and RMSNorm:
# * 16-bit rows of 512 to 1024: 64 bytes a thread (4 warps instead of 8). LayerNorm 16384 x 1024
#   0.0885 -> 0.0642 ms, 32768 x 512 0.0931 -> 0.0674; 256-wide rows (16 a tile) were 9% slower.
#   RMSNorm was 1-4% slower so without prefetch, and faster with it (below).
# Prefetch (results/2026-11-24-h100-3/call6; tune_rows.py norm_backward_prefetch and
# norm_backward_groups), where it measured faster than the loop without it (calls 3-4):
# * 16-bit RMSNorm rows of 256 to 1024: 32768 x 512 0.0619 -> 0.0550 ms (4 warps), 16384 x 1024
#   fp16 0.0595 -> 0.0575 (4 warps), 65536 x 256 0.0584 -> 0.0557 (the shared tile);
# * not LayerNorm: rows of 1024 were 6% faster in the backward sweep (fp16 16384 x 1024 0.0640 ->
#   0.0599 ms), but forward+backward in the harness benchmark was 2.2% slower there (call 7, the
#   gate's regression; bf16 1.7% faster, not significant); at 512 it tied, at 4096 it was slower
#   (0.1019 -> 0.1108), at 256 mixed;
# * fp32 dropout-add-norm rows of 1024, one row a tile at 4 warps (_GPU_BWD_DROPOUT_FP32): 8192 x
#   1024 0.0923 -> 0.0783 ms (issue 4's case). At the 8 KB tile it was slower (0.1215), as it was
#   for bf16 16384 x 1024 (0.0931 against 0.0888).
# Dropout-add-norm's backward (tune_rows.py dropout_norm_backward; results/.../call9), rows within one
# block: 8 KB of input a tile at 64 bytes a thread (4 warps; _dropout_bwd_limits). 8192 x 1024
# fp32 0.1502 -> 0.0921 ms (issue 4's case), bf16 16384 x 1024 0.1132 -> 0.0931, 8192 x 4096
# 0.1770 -> 0.1486, 65536 x 256 0.1063 -> 0.0928 (the best there, 8 rows a tile, 0.0889). The
# RMSNorm form takes it too (same kernel and traffic; verified on the H100, not timed).
# GPU forward override, dropout-add-norm (tune_rows.py dropout_norm_forward; results/2026-11-24-h100-3/
# call1): 1024 elements a program (one row of 1024, four of 256) instead of 4096, at the shared
# 64 bytes a thread. Drawing the mask and the fp64 arithmetic of fp32 rows make its programs
# longer than a plain norm's, and smaller ones overlap better. fp32 8192 x 1024 0.0588 -> 0.0467
# ms (compile 0.0483; the same tile with fp32 arithmetic, call 5: 0.0427, so fp64 costs 9%);
# bf16 16384 x 1024 0.0534 -> 0.0432, 8192 x 4096 0.0914 -> 0.0832, 65536 x 256 0.0507 -> 0.0440,
# 32768 x 512 0.0622 -> 0.0444. Rows of 4096 columns or more take one row a program either way.
# Swept for dropout-add-LayerNorm; the RMSNorm form takes it too (same kernel and traffic).
# The sweeps of the shared limits set OVERRIDES = False, so that each candidate is timed as given;
# dropout_norm_forward varies _GPU_FWD_DROPOUT itself.
_GPU_FWD_DROPOUT = _GPU_FWD._replace(target_elems=1024)
# Backward of rows wider than one block (the row-sums and column kernels), from the H100 sweep
# tune_rows.py norm_backward_columns (results/2026-11-24-h100-7/call1), the backward alone at
# 1024 x 16384 bf16: column blocks of 1024, 2 rows a tile, 4 warps, 4 programs an SM. LayerNorm
# 0.0723 ms, RMSNorm 0.0704, dropout-add-LayerNorm 0.0940, against 0.0900 / 0.0820 / 0.1364 at
# 4 rows, 8 warps and 2 programs; blocks of 512 were 1.4-2.6x slower, of 2048 within 2-11%.
_GPU_BWD_COLUMNS = _GPU_BWD._replace(target_elems=2048, thread_bytes=32)
_GPU_BWD_NARROW16 = _GPU_BWD._replace(thread_bytes=64)
_NARROW16 = (512, 1024)  # the row blocks it applies to (both norms)
_GPU_BWD_DROPOUT_FP32 = _GPU_BWD._replace(target_elems=512, thread_bytes=32)
_DROPOUT_FP32_BLOCK = 1024  # the row block it and prefetch apply to (fp32 dropout-add-norm)
_PREFETCH_RMS16 = (256, 1024)  # row blocks of 16-bit RMSNorm that prefetch
_DROPOUT_BWD_TILE_BYTES = 8192
OVERRIDES = True


def _dropout_bwd_limits(itemsize: int) -> _rows.TileLimits:
    return _GPU_BWD._replace(target_elems=_DROPOUT_BWD_TILE_BYTES // itemsize, thread_bytes=64)


def _gpu_bwd_limits(n: int, dtype: torch.dtype, dropout: bool) -> _rows.TileLimits:
    """The GPU backward's limits for rows of n elements: the shared ``_GPU_BWD``, or the measured
    exception (above) that covers these rows."""
    block = _row_block(n)
    columns = _column_limits(block)
    if columns is not None:
        return columns
    if not OVERRIDES:
        return _GPU_BWD
    if dropout:
        return _GPU_BWD_DROPOUT_FP32 if _fp32_dropout_rows(block, dtype) else _dropout_bwd_limits(dtype.itemsize)
    if dtype.itemsize != 2:
        return _GPU_BWD
    if _NARROW16[0] <= block <= _NARROW16[1]:
        return _GPU_BWD_NARROW16
    return _GPU_BWD


def _row_block(n: int) -> int:
    """The power-of-two block a row of n elements rounds up to."""
    return triton.next_power_of_2(max(n, 1))


def _column_limits(block: int) -> _rows.TileLimits | None:
    """The GPU limits of the column kernels if rows of this power-of-two block take them (wider
    than _GPU_BWD.max_block, or from BWD_COLUMNS_FROM where a sweep sets it), else None."""
    first = 2 * _GPU_BWD.max_block if BWD_COLUMNS_FROM is None else BWD_COLUMNS_FROM
    if block < first:
        return None
    return _GPU_BWD_COLUMNS._replace(max_block=min(_GPU_BWD_COLUMNS.max_block, first // 2))


def _fp32_dropout_rows(block: int, dtype: torch.dtype) -> bool:
    """fp32 dropout-add-norm rows in the block that takes one row a tile with prefetch."""
    return dtype == torch.float32 and block == _DROPOUT_FP32_BLOCK


def _bwd_prefetch(n: int, dtype: torch.dtype, rms: bool, dropout: bool) -> bool:
    """Whether the backward prefetches row tiles for rows of n elements (the rule above). Under
    the interpreter by dtype and op alone, so that CPU tests run both forms of the loop."""
    if BWD_PREFETCH is not None:
        return BWD_PREFETCH
    sixteen = dtype.itemsize == 2
    if _rows._SMALL_TILES:
        return dtype == torch.float32 if dropout else sixteen
    block = _row_block(n)
    if not OVERRIDES or _column_limits(block) is not None:
        return False
    if dropout:
        return _fp32_dropout_rows(block, dtype)
    if not sixteen:
        return False
    return rms and _PREFETCH_RMS16[0] <= block <= _PREFETCH_RMS16[1]


@functools.lru_cache(maxsize=1024)
def _tile(n: int, dtype: torch.dtype, backward: bool, dropout: bool) -> _rows.RowTile:
    if not backward:
        limits = _GPU_FWD_DROPOUT if dropout and OVERRIDES and not _rows._SMALL_TILES else _fwd_limits()
    elif _rows._SMALL_TILES:
        limits = _INTERPRETER_BWD
    else:
        limits = _gpu_bwd_limits(n, dtype, dropout)
    tile = _rows.row_tile(n, dtype.itemsize, limits)
    if dropout and tile.block < _MIN_DROPOUT_BLOCK:
        tile = tile._replace(block=_MIN_DROPOUT_BLOCK)
    return tile


# fp32 inputs compute in fp64: an fp32 result must come out within about one ulp, as eager's CPU
# LayerNorm does, and an fp32 chain of shift, centring, 1/std, weight and bias reaches 2-3 ulp
# (measured: 2.4x eager's envelope on a 9-wide row). On an H100 the fp64 pipe does 64 FMA per
# clock per SM, several times what fp32 rows at full bandwidth need (about 1.5 elements per clock
# per SM); the cost is registers (two per value). WIDE_FP32 = False gives fp32 arithmetic with
# correctly rounded division and square root instead (PRECISE), if the GPU run shows spills.
WIDE_FP32 = True
_WIDE = (torch.float32, torch.float64) if WIDE_FP32 else (torch.float64,)


def _numerics(dtype: torch.dtype) -> dict:
    """COMPUTE: element arithmetic and row statistics. ACC: the weight-gradient partial sums.
    PRECISE: correctly rounded division and square root where COMPUTE is fp32 and results fp32."""
    return dict(
        COMPUTE=tl.float64 if dtype in _WIDE else tl.float32,
        ACC=tl.float64 if dtype in (torch.float32, torch.float64) else tl.float32,
        PRECISE=dtype == torch.float32,
    )


def _stats_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype in _WIDE else torch.float32


def _bwd_programs_per_sm(columns: bool) -> int:
    """Backward programs per SM (``columns``: rows cut into column blocks): the measured count, or
    the one a sweep forces."""
    if BWD_PROGRAMS_PER_SM is not None:
        return BWD_PROGRAMS_PER_SM
    return _GPU_BWD_COLUMN_PROGRAMS_PER_SM if columns else _GPU_BWD_PROGRAMS_PER_SM


def _tiles_per_group(t: torch.Tensor, row_tiles: int, col_blocks: int, programs_per_sm: int) -> int:
    """Row tiles per backward program: few partial rows, but enough programs (groups x column
    blocks) to fill the GPU."""
    if _rows._SMALL_TILES:
        return _INTERPRETER_TILES_PER_GROUP
    return _rows.tiles_per_group(row_tiles, max(1, programs_per_sm * sm_count(t.device) // col_blocks))


# ----------------------------------------------------------------------------------------------
# Dropout parameters
# ----------------------------------------------------------------------------------------------

SEED_LIMIT = 2**63  # seeds are non-negative 64-bit integers


class Dropout(NamedTuple):
    """Host-side dropout parameters: Philox key, integer keep threshold and the 1/(1-p) scale.

    An element is kept when its 31 random bits ``r`` satisfy ``r > threshold``, threshold =
    ``round(p * 2^31) - 1``: kept with probability ``1 - round(p * 2^31) / 2^31`` (within 2^-32 of
    1 - p), every element at p = 0 and none at p = 1.

    The scale 1/(1-p) (0 when p = 1) travels as ``scale`` + ``scale_lo``: its fp32 rounding and
    the rest. A float scalar is fp32 inside a kernel (a compiled kernel's argument, and under the
    interpreter too once ``tl.where`` takes it), and the fp32 1/(1-p) is up to 2^-24 off: where
    ``x * scale`` nearly cancels the residual, that made the H100's fp32 prenorm sum 15 ulp off
    (score 5.54) while CUDA eager was within one (CPU eager rounds its scale to fp32 as well, so
    its own error hid the kernel's there). fp64 arithmetic (fp32 inputs) adds ``x * scale_lo``
    (:func:`_dropped`); 16-bit inputs need only ``scale``.
    """

    seed: int
    threshold: int
    scale: float
    scale_lo: float = 0.0

    @classmethod
    def of(cls, p: float, seed: int) -> Dropout:
        exact = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
        hi = struct.unpack("f", struct.pack("f", exact))[0]  # rounded to fp32 (nearest even), no tensor made
        return cls(seed=seed, threshold=round(p * 2**31) - 1, scale=hi, scale_lo=exact - hi)


_NO_DROPOUT = Dropout(seed=0, threshold=-1, scale=1.0)


# ----------------------------------------------------------------------------------------------
# Validation shared by the wrappers
# ----------------------------------------------------------------------------------------------


def check_input(op: str, name: str, x: object) -> torch.Tensor:
    return check_tensor(op, name, x, dtypes=DTYPES, min_ndim=1)


def check_row_tensor(op: str, name: str, value: object, x: torch.Tensor, what: str) -> torch.Tensor:
    """An optional per-column tensor (weight, bias): None, or shape ``(N,)``, x's device and dtype."""
    if value is None or (
        type(value) is torch.Tensor and value.dtype is x.dtype and value.device == x.device and value.ndim == 1
        and value.shape[0] == x.shape[-1]
    ):
        return value  # None, or every check below passes (one test, on every call)
    check_tensor(op, name, value, dtypes=DTYPES)
    check_same_device(op, x=x, **{name: value})
    check_same_dtype(op, x=x, **{name: value})
    check_shape(op, name, value, x.shape[-1:], what)
    return value


def check_eps(op: str, eps: object) -> float:
    eps = check_finite_scalar(op, "eps", eps)
    if eps < 0:
        raise ValueError(f"{op}: argument 'eps' must be >= 0 (it is added to the variance), got {eps}")
    return eps


def check_seed(op: str, seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{op}: argument 'seed' must be an int, got {type(seed).__name__}")
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"{op}: argument 'seed' must be in [0, 2**63), got {seed}")
    return seed


def check_probability(op: str, p: object) -> float:
    p = check_finite_scalar(op, "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: argument 'p' is a drop probability and must be in [0, 1], got {p}")
    return p


# ----------------------------------------------------------------------------------------------
# Triton helpers
# ----------------------------------------------------------------------------------------------


@triton.jit
def keep_mask(seed, threshold, rows, start, ROWS: tl.constexpr, BLOCK: tl.constexpr, DRAW: tl.constexpr):
    """[ROWS, BLOCK] bool: which elements of columns start..start+BLOCK of ``rows`` are kept.

    Column c of row r takes output ``c % 4`` of Philox with counters (c // 4, r_lo, r_hi, 0) and
    key ``seed``: one Philox call per four columns (the generator is the costliest part of a
    dropout kernel), a stream per row that cannot overflow (no ``row * N + col`` product).
    ``start`` and BLOCK are multiples of 4. Without DRAW (threshold < 0: p so small that every
    element is kept) nothing is drawn and the mask is all True, the same mask the stream gives.
    """
    if not DRAW:
        return tl.full([ROWS, BLOCK], 1, tl.int1)
    quads: tl.constexpr = BLOCK // 4
    r = rows.to(tl.int64)
    c0 = tl.broadcast_to((start // 4 + tl.arange(0, quads)).to(tl.uint32)[None, :], [ROWS, quads])
    c1 = tl.broadcast_to((r & 0xFFFFFFFF).to(tl.uint32)[:, None], [ROWS, quads])
    c2 = tl.broadcast_to((r >> 32).to(tl.uint32)[:, None], [ROWS, quads])
    a, b, c, d = tl.philox(seed, c0, c1, c2, c2 * 0)
    bits = tl.reshape(tl.join(tl.join(a, b), tl.join(c, d)), [ROWS, BLOCK])
    return (bits >> 1).to(tl.int32) > threshold


@triton.jit
def _sqrt(x, PRECISE: tl.constexpr):
    """sqrt(x), correctly rounded with PRECISE and fp32 x (fp64 square roots always are)."""
    if PRECISE and x.dtype == tl.float32:
        return tl.math.sqrt_rn(x)
    else:
        return tl.sqrt(x)


@triton.jit
def _dropped(x, keep, scale, scale_lo, COMPUTE: tl.constexpr):
    """``x * keep / (1 - p)`` (``Dropout``): in fp64 with both parts of the scale (for fp32 inputs
    each product is exact in fp64, so the sum is rounded once), in fp32 with its fp32 part alone."""
    if COMPUTE == tl.float64:
        return x * tl.where(keep, scale, 0.0).to(tl.float64) + x * tl.where(keep, scale_lo, 0.0).to(tl.float64)
    else:
        return x * tl.where(keep, scale, 0.0)


@triton.jit
def _source(x_ptr, res_ptr, xb_ptr, x_off, r_off, rows, start, cols, mask, n_cols, seed, threshold, scale, scale_lo,
            ROWS: tl.constexpr, BLOCK: tl.constexpr, DROPOUT_ADD: tl.constexpr, HAS_XBIAS: tl.constexpr, DRAW: tl.constexpr,
            COMPUTE: tl.constexpr):
    """The rows to normalise for columns start + cols (0 where masked), and the keep-mask.

    Plain norms: x. Dropout-add-norm: ``s = (x + xbias) * keep * scale + residual``, rounded to the
    input dtype. ``x * 0`` for a dropped element keeps a NaN or inf of x, as torch's dropout does.
    """
    x = tl.load(x_ptr + x_off + start + cols, mask=mask, other=0.0).to(COMPUTE)
    if DROPOUT_ADD:
        if HAS_XBIAS:
            x = x + tl.load(xb_ptr + start + cols, mask=start + cols < n_cols, other=0.0).to(COMPUTE)
        keep = keep_mask(seed, threshold, rows, start, ROWS, BLOCK, DRAW)
        residual = tl.load(res_ptr + r_off + start + cols, mask=mask, other=0.0).to(COMPUTE)
        s = _dropped(x, keep, scale, scale_lo, COMPUTE) + residual
        return _rows.cast_for_store(s, x_ptr).to(COMPUTE), keep
    else:
        return x, mask


@triton.jit
def _shift(s, x_ptr, x_row, row_ok, cols, DROPOUT_ADD: tl.constexpr, COMPUTE: tl.constexpr):
    """K, each row's first element of s. A plain norm loads it (a cached scalar load: one row
    reduction fewer before the statistics, each a shared-memory round trip across warps);
    dropout-add-norm builds s in registers, so K is picked out of the tile."""
    if DROPOUT_ADD:
        return tl.sum(tl.where(cols == 0, s, 0.0), axis=1)
    else:
        return tl.load(x_ptr + x_row, mask=row_ok, other=0.0).to(COMPUTE)


@triton.jit
def _stats_init(s, k, mask, count, RMS: tl.constexpr, PRECISE: tl.constexpr):
    """Statistics of the first block of each row: (K, m, sq) where K is the row's first element
    (``k``, from :func:`_shift`), m the mean of s - K over the block and sq the sum of squared
    deviations (RMS: K = m = 0 and sq = sum of squares)."""
    if RMS:
        sq = tl.sum(s * s, axis=1)
        zero = tl.full(sq.shape, 0.0, sq.dtype)
        return zero, zero, sq
    else:
        d = tl.where(mask, s - k[:, None], 0.0)
        m, dev = _block_mean(d, mask, count, PRECISE)
        return k, m, tl.sum(dev * dev, axis=1)


REFINE_MIN_BLOCK = tl.constexpr(2048)


@triton.jit
def _block_mean(d, mask, count, PRECISE: tl.constexpr):
    """(m, d - m) for the mean m of each row's ``d`` (``count`` valid columns).

    In fp32, blocks of REFINE_MIN_BLOCK columns or more refine the mean once with the mean of the
    deviations: where K sits a spread away from the mean, s - K carries a bias of that size, and
    the fp32 tree sum of it and the GPU's approximate division were several ulps of the bias off
    (a bf16 row of 8193 normal values on the H100 nightly: the output 2 bf16 ulps off near the
    mean, 2.12x the envelope). The deviations have mean -error, so their sum rounds like a random
    walk and returns the error; the deviations stay about m, so the variance moves by the square of
    the correction. The refinement is a third row reduction, which the H100 measured at 11% of
    LayerNorm's forward at 65536 x 256 and within noise from 2048 columns (results/2026-11-24-h100-5,
    call 8); shorter blocks sum few terms (a tree sum of 256-1024 biased terms, emulated in numpy:
    within 1.05 ulps). fp64 arithmetic needs no refinement."""
    m = _rows.div(tl.sum(d, axis=1), count, PRECISE)
    dev = tl.where(mask, d - m[:, None], 0.0)
    if d.dtype == tl.float32 and d.shape[1] >= REFINE_MIN_BLOCK:
        m += _rows.div(tl.sum(dev, axis=1), count, PRECISE)
    return m, dev


@triton.jit
def _stats_add(k, m, m_err, sq, seen, s, mask, count, RMS: tl.constexpr, PRECISE: tl.constexpr):
    """Fold one more block (``count`` valid columns) into (m, sq) after ``seen`` columns (Chan).

    The running mean is ``m + m_err``: each update's rounding is kept in ``m_err`` (TwoSum), as a
    rounding of m per block adds up over a long row (the interpreter's 8193-column rows in blocks
    of its small tile: 4.4 ulps, 6.5x the envelope of a bf16 output that sits near the mean)."""
    if RMS:
        return m, m_err, sq + tl.sum(s * s, axis=1)
    else:
        d = tl.where(mask, s - k[:, None], 0.0)
        block_m, dev = _block_mean(d, mask, count, PRECISE)
        block_sq = tl.sum(dev * dev, axis=1)
        total = seen + count
        delta = (block_m - m) - m_err
        step = _rows.div(delta * count, total, PRECISE)
        new_m = m + step
        back = new_m - m
        m_err += (m - (new_m - back)) + (step - back)
        sq = sq + block_sq + _rows.div(delta * delta * seen * count, total, PRECISE)
        return new_m, m_err, sq


@triton.jit
def _stats_finish(sq, n_f, eps, PRECISE: tl.constexpr):
    """rstd = 1 / sqrt(sq / N + eps); ``n_f`` is N as a float."""
    var = _rows.div(sq, tl.full(sq.shape, 0.0, sq.dtype) + n_f, PRECISE)
    one = tl.full(var.shape, 1.0, var.dtype)
    return _rows.div(one, _sqrt(var + eps, PRECISE), PRECISE)


@triton.jit
def _normalized(s, k, m, rstd, RMS: tl.constexpr):
    """xhat: ((s - K) - m) * rstd for LayerNorm, s * rstd for RMSNorm (the forward's own centring)."""
    if RMS:
        return s * rstd[:, None]
    else:
        return ((s - k[:, None]) - m[:, None]) * rstd[:, None]


@triton.jit
def _scale_vector(w_ptr, start, cols, n_cols, w_offset, HAS_W: tl.constexpr, COMPUTE: tl.constexpr):
    """weight + weight_offset for columns start + cols (1 when there is no weight)."""
    if HAS_W:
        return tl.load(w_ptr + start + cols, mask=start + cols < n_cols, other=0.0).to(COMPUTE) + w_offset
    else:
        return tl.full(cols.shape, 1.0, COMPUTE)


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------
# Zeros are written ``tl.full(shape, 0.0, dtype)``: ``tl.zeros`` is a jit function, and under the
# interpreter every nested jit call costs ~1.8 ms of patching (tl.full is a builtin, free).


@_launch.jit(do_not_specialize=["seed", "threshold"])
def _norm_fwd_kernel(
    x_ptr, res_ptr, xb_ptr, w_ptr, b_ptr, y_ptr, sum_ptr, mask_ptr, stats_ptr,
    eps, w_offset, seed, threshold, scale, scale_lo,  # per call; the rest is fixed by the layout
    n_rows, n_cols, n_f, x_inner, x_so, x_si, r_inner, r_so, r_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, SPLIT: tl.constexpr, RMS: tl.constexpr,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, DROPOUT_ADD: tl.constexpr, HAS_XBIAS: tl.constexpr, DRAW: tl.constexpr,
    STORE_SUM: tl.constexpr, STORE_MASK: tl.constexpr, STORE_STATS: tl.constexpr, EVEN: tl.constexpr,
    COMPUTE: tl.constexpr, ACC: tl.constexpr, PRECISE: tl.constexpr,  # ACC: backward only
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if EVEN:  # every tile full (even_tiles): constant masks, which Triton folds away
        row_ok = tl.full([ROWS], True, tl.int1)
        # Every row is exactly one block: with n_cols a constant the vectors' masks, which have
        # the tile's [ROWS, BLOCK] shape (_rows.across_rows), fold away too (sm_90 SASS of
        # LayerNorm at 16 x 256 bf16: 592 instructions a program, 688 with n_cols a variable).
        n_cols = BLOCK
    else:
        row_ok = rows < n_rows
    x_row = _rows.row_offset(rows, x_inner, x_so, x_si)
    x_off = x_row[:, None]
    r_off = _rows.row_offset(rows, r_inner, r_so, r_si)[:, None]
    dense = rows.to(tl.int64)[:, None] * n_cols
    # The columns of every row of the tile, so that weight, bias and xbias load in the tile's layout
    # (_rows.across_rows).
    cols = _rows.across_rows(tl.arange(0, BLOCK)[None, :], ROWS)

    # First block (the whole row unless SPLIT): source, side outputs, statistics.
    if EVEN:
        mask = tl.full([ROWS, BLOCK], True, tl.int1)
    else:
        mask = row_ok[:, None] & (cols < n_cols)
    s, keep = _source(x_ptr, res_ptr, xb_ptr, x_off, r_off, rows, 0, cols, mask, n_cols, seed, threshold,
                      scale, scale_lo, ROWS, BLOCK, DROPOUT_ADD, HAS_XBIAS, DRAW, COMPUTE)
    if STORE_SUM:
        tl.store(sum_ptr + dense + cols, _rows.cast_for_store(s, sum_ptr), mask=mask)
    if STORE_MASK:
        tl.store(mask_ptr + dense + cols, keep, mask=mask)
    # Column counts as [ROWS] tensors built from n_f, N as a float (Triton turns an int argument
    # equal to 1 into a constexpr; the interpreter hands scalar arguments over as Python numbers).
    zero = tl.full([ROWS], 0.0, COMPUTE)
    count = tl.minimum(zero + n_f, BLOCK * 1.0)
    k = tl.full([ROWS], 0.0, COMPUTE)
    if not RMS:
        k = _shift(s, x_ptr, x_row, row_ok, cols, DROPOUT_ADD, COMPUTE)
    k, m, sq = _stats_init(s, k, mask, count, RMS, PRECISE)

    if SPLIT:
        seen = count
        m_err = zero
        for start in range(BLOCK, n_cols, BLOCK):
            mask = row_ok[:, None] & (start + cols < n_cols)
            s, keep = _source(x_ptr, res_ptr, xb_ptr, x_off, r_off, rows, start, cols, mask, n_cols, seed,
                              threshold, scale, scale_lo, ROWS, BLOCK, DROPOUT_ADD, HAS_XBIAS, DRAW, COMPUTE)
            if STORE_SUM:
                tl.store(sum_ptr + dense + start + cols, _rows.cast_for_store(s, sum_ptr), mask=mask)
            if STORE_MASK:
                tl.store(mask_ptr + dense + start + cols, keep, mask=mask)
            count = tl.minimum(zero + (n_f - start), BLOCK * 1.0)
            m, m_err, sq = _stats_add(k, m, m_err, sq, seen, s, mask, count, RMS, PRECISE)
            seen += count
        m += m_err
    rstd = _stats_finish(sq, n_f, eps, PRECISE)
    if STORE_STATS:
        tl.store(stats_ptr + rows, k, mask=row_ok)
        tl.store(stats_ptr + n_rows + rows, m, mask=row_ok)
        tl.store(stats_ptr + 2 * n_rows + rows, rstd, mask=row_ok)

    if not SPLIT:
        y = _normalized(s, k, m, rstd, RMS) * _scale_vector(w_ptr, 0, cols, n_cols, w_offset, HAS_W, COMPUTE)
        if HAS_B:
            y += tl.load(b_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)
        tl.store(y_ptr + dense + cols, _rows.cast_for_store(y, y_ptr), mask=mask)
    else:
        # Second pass: s again, from x (plain norms) or from the stored sum (dropout-add-norm, whose
        # launcher always stores it on this path). The barrier orders this program's own stores of
        # s before its loads, whichever threads hold them.
        tl.debug_barrier()
        for start in range(0, n_cols, BLOCK):
            mask = row_ok[:, None] & (start + cols < n_cols)
            if DROPOUT_ADD:
                s = tl.load(sum_ptr + dense + start + cols, mask=mask, other=0.0).to(COMPUTE)
            else:
                s = tl.load(x_ptr + x_off + start + cols, mask=mask, other=0.0).to(COMPUTE)
            y = _normalized(s, k, m, rstd, RMS) * _scale_vector(w_ptr, start, cols, n_cols, w_offset, HAS_W, COMPUTE)
            if HAS_B:
                y += tl.load(b_ptr + start + cols, mask=start + cols < n_cols, other=0.0).to(COMPUTE)
            tl.store(y_ptr + dense + start + cols, _rows.cast_for_store(y, y_ptr), mask=mask)


@triton.jit
def _row_means(gx, g, n_f, RMS: tl.constexpr, PRECISE: tl.constexpr):
    """c1 = mean(g * xhat) and (LayerNorm) c2 = mean(g), from [ROWS, BLOCK] arrays of the terms
    g * xhat and g (or of their sums over several blocks)."""
    sum_gx = tl.sum(gx, axis=1)
    n = tl.full(sum_gx.shape, 0.0, sum_gx.dtype) + n_f
    c1 = _rows.div(sum_gx, n, PRECISE)
    if RMS:
        return c1, c1  # c2 unused
    else:
        return c1, _rows.div(tl.sum(g, axis=1), n, PRECISE)


@triton.jit
def _bwd_tile_loads(s_ptr, dy_ptr, stats_ptr, rows, row_ok, col_ok, n_rows, s_inner, s_so, s_si, g_inner, g_so, g_si,
                    BLOCK: tl.constexpr, CAST: tl.constexpr, COMPUTE: tl.constexpr):
    """One backward row tile's inputs (s, dy) and its statistics (K, m, rstd). s and dy come as
    stored, or with CAST converted to COMPUTE as they load (the loop without prefetch: the order,
    and so the machine code, of the loop before prefetch existed)."""
    mask = row_ok[:, None] & col_ok
    s_off = _rows.row_offset(rows, s_inner, s_so, s_si)[:, None]
    g_off = _rows.row_offset(rows, g_inner, g_so, g_si)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    s = tl.load(s_ptr + s_off + cols, mask=mask, other=0.0)
    if CAST:
        s = s.to(COMPUTE)
    dy = tl.load(dy_ptr + g_off + cols, mask=mask, other=0.0)
    if CAST:
        dy = dy.to(COMPUTE)
    k = tl.load(stats_ptr + rows, mask=row_ok, other=0.0)
    m = tl.load(stats_ptr + n_rows + rows, mask=row_ok, other=0.0)
    rstd = tl.load(stats_ptr + 2 * n_rows + rows, mask=row_ok, other=0.0)
    return s, dy, k, m, rstd


@triton.jit
def _grad_rows(g, xhat, rstd, c1, c2, RMS: tl.constexpr):
    """d loss / d s = rstd * (g - xhat * c1 [- c2]), g = dy * (weight + offset)."""
    if RMS:
        return (g - xhat * c1[:, None]) * rstd[:, None]
    else:
        return (g - xhat * c1[:, None] - c2[:, None]) * rstd[:, None]


@triton.jit
def _given_row_means(sums_ptr, rows, row_ok, n_rows, n_f, RMS: tl.constexpr, PRECISE: tl.constexpr,
                     COMPUTE: tl.constexpr):
    """c1 and (LayerNorm) c2 of :func:`_row_means` for a row tile, from the per-block row sums that
    :func:`_norm_bwd_row_sums_kernel` wrote (``sums[0, block, row]``: g * xhat, ``sums[1, block,
    row]``: g), added over the blocks in a fixed order. The column kernel has as many blocks as the
    row-sums kernel (one tiling), so the count is its grid's second dimension."""
    n_blocks = tl.num_programs(1)
    sum_gx = tl.full([rows.shape[0]], 0.0, COMPUTE)
    sum_g = tl.full([rows.shape[0]], 0.0, COMPUTE)
    for j in range(0, n_blocks):
        sum_gx += tl.load(sums_ptr + j * n_rows + rows, mask=row_ok, other=0.0)
        if not RMS:
            sum_g += tl.load(sums_ptr + (n_blocks + j) * n_rows + rows, mask=row_ok, other=0.0)
    n = tl.full(sum_gx.shape, 0.0, COMPUTE) + n_f
    c1 = _rows.div(sum_gx, n, PRECISE)
    if RMS:
        return c1, c1  # c2 unused
    else:
        return c1, _rows.div(sum_g, n, PRECISE)


@_launch.jit
def _norm_bwd_row_sums_kernel(
    s_ptr, dy_ptr, w_ptr, stats_ptr, sums_ptr, w_offset, n_rows, n_cols,
    s_inner, s_so, s_si, g_inner, g_so, g_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, RMS: tl.constexpr, HAS_W: tl.constexpr, COMPUTE: tl.constexpr,
):
    """Rows wider than one block, first kernel: each row's sums of g * xhat and (LayerNorm) g over
    one column block (program (row tile, column block)), for the column kernel's c1 and c2."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    block = tl.program_id(1)
    start = block * BLOCK
    row_ok = rows < n_rows
    cols = tl.arange(0, BLOCK)[None, :]
    col_ok = start + cols < n_cols
    s, dy, k, m, rstd = _bwd_tile_loads(s_ptr + start, dy_ptr + start, stats_ptr, rows, row_ok, col_ok, n_rows,
                                        s_inner, s_so, s_si, g_inner, g_so, g_si, BLOCK, True, COMPUTE)
    g = dy * _scale_vector(w_ptr, start, cols, n_cols, w_offset, HAS_W, COMPUTE)
    xhat = tl.where(row_ok[:, None] & col_ok, _normalized(s, k, m, rstd, RMS), 0.0)
    out = sums_ptr + block * n_rows + rows
    tl.store(out, tl.sum(g * xhat, axis=1), mask=row_ok)
    if not RMS:
        tl.store(out + tl.num_programs(1) * n_rows, tl.sum(g, axis=1), mask=row_ok)


@_launch.jit(do_not_specialize=["seed", "threshold"])
def _norm_bwd_kernel(
    s_ptr, dy_ptr, dsum_ptr, w_ptr, stats_ptr, sums_ptr, ds_ptr, dx_ptr, part_ptr,
    w_offset, seed, threshold, scale, scale_lo,  # per call; the rest is fixed by the layout
    n_rows, n_cols, n_f, tiles_per_group, s_inner, s_so, s_si, g_inner, g_so, g_si, h_inner, h_so, h_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, SUMS_GIVEN: tl.constexpr, RMS: tl.constexpr,
    HAS_W: tl.constexpr, DW: tl.constexpr, DB: tl.constexpr, DXB: tl.constexpr,
    DROPOUT: tl.constexpr, HAS_DSUM: tl.constexpr, DRAW: tl.constexpr, PREFETCH: tl.constexpr,
    COMPUTE: tl.constexpr, ACC: tl.constexpr, PRECISE: tl.constexpr,
):
    # Program (group, column block): the group's row tiles, in the columns of one block (all of a
    # row that fits one block). ds = d loss / d s (the norm's input): written to ds_ptr. With
    # DROPOUT, dx = ds * keep * scale too (the gradient of the dropped input). Partial sums of this
    # group's rows: dw (dy * xhat), db (dy), dxb (dx), one row each per group, in ACC. A row that
    # fits the block gives its own c1 and c2; with SUMS_GIVEN (rows wider than a block) they come
    # from the row-sums kernel's sums_ptr. The partial sums asked for lie in part_ptr in that order
    # (dw, db, dxb), one [groups, n_cols] block each.
    group = tl.program_id(0)
    dw_part = part_ptr
    db_part = part_ptr
    if DW:
        db_part += tl.num_programs(0).to(tl.int64) * n_cols
    dxb_part = db_part
    if DB:
        dxb_part += tl.num_programs(0).to(tl.int64) * n_cols
    if SUMS_GIVEN:
        start = tl.program_id(1) * BLOCK
    else:
        start = 0  # a constant: rows of one block compile as they did before column blocks existed
    cols = tl.arange(0, BLOCK)[None, :]
    col_ok = start + cols < n_cols
    part_row = group.to(tl.int64) * n_cols + start
    s_ptr += start
    dy_ptr += start
    dsum_ptr += start
    ds_ptr += start
    dx_ptr += start
    wv = _scale_vector(w_ptr, start, cols, n_cols, w_offset, HAS_W, COMPUTE)
    acc_dw = tl.full([ROWS, BLOCK], 0.0, ACC)
    acc_db = tl.full([ROWS, BLOCK], 0.0, ACC)
    acc_dxb = tl.full([ROWS, BLOCK], 0.0, ACC)
    if PREFETCH:  # the group's first tile, loaded before the loop
        first = group * tiles_per_group * ROWS + tl.arange(0, ROWS)
        s_next, dy_next, k_next, m_next, rstd_next = _bwd_tile_loads(
            s_ptr, dy_ptr, stats_ptr, first, first < n_rows, col_ok, n_rows,
            s_inner, s_so, s_si, g_inner, g_so, g_si, BLOCK, False, COMPUTE)
    for t in range(0, tiles_per_group):
        rows = (group * tiles_per_group + t) * ROWS + tl.arange(0, ROWS)
        row_ok = rows < n_rows
        mask = row_ok[:, None] & col_ok
        dense = rows.to(tl.int64)[:, None] * n_cols
        if PREFETCH:  # this tile's inputs came with the previous step; the next tile's go out now
            s, dy, k, m, rstd = s_next, dy_next, k_next, m_next, rstd_next
            ahead = rows + ROWS
            s_next, dy_next, k_next, m_next, rstd_next = _bwd_tile_loads(
                s_ptr, dy_ptr, stats_ptr, ahead, (ahead < n_rows) & (t + 1 < tiles_per_group), col_ok, n_rows,
                s_inner, s_so, s_si, g_inner, g_so, g_si, BLOCK, False, COMPUTE)
        else:
            s, dy, k, m, rstd = _bwd_tile_loads(s_ptr, dy_ptr, stats_ptr, rows, row_ok, col_ok, n_rows, s_inner,
                                                s_so, s_si, g_inner, g_so, g_si, BLOCK, True, COMPUTE)
        s = s.to(COMPUTE)
        dy = dy.to(COMPUTE)
        xhat = tl.where(mask, _normalized(s, k, m, rstd, RMS), 0.0)
        g = dy * wv
        if SUMS_GIVEN:
            c1, c2 = _given_row_means(sums_ptr, rows, row_ok, n_rows, n_f, RMS, PRECISE, COMPUTE)
        else:
            c1, c2 = _row_means(g * xhat, g, n_f, RMS, PRECISE)
        ds = _grad_rows(g, xhat, rstd, c1, c2, RMS)
        if HAS_DSUM:
            h_off = _rows.row_offset(rows, h_inner, h_so, h_si)[:, None]
            ds += tl.load(dsum_ptr + h_off + cols, mask=mask, other=0.0).to(COMPUTE)
        tl.store(ds_ptr + dense + cols, _rows.cast_for_store(ds, ds_ptr), mask=mask)
        if DROPOUT:
            keep = keep_mask(seed, threshold, rows, start, ROWS, BLOCK, DRAW)
            dx = _dropped(ds, keep, scale, scale_lo, COMPUTE)
            tl.store(dx_ptr + dense + cols, _rows.cast_for_store(dx, dx_ptr), mask=mask)
            if DXB:
                acc_dxb += tl.where(mask, dx, 0.0).to(ACC)
        if DW:
            acc_dw += tl.where(mask, dy * xhat, 0.0).to(ACC)
        if DB:
            acc_db += dy.to(ACC)
    if DW:
        tl.store(dw_part + part_row + cols, tl.sum(acc_dw, axis=0)[None, :], mask=col_ok)
    if DB:
        tl.store(db_part + part_row + cols, tl.sum(acc_db, axis=0)[None, :], mask=col_ok)
    if DXB:
        tl.store(dxb_part + part_row + cols, tl.sum(acc_dxb, axis=0)[None, :], mask=col_ok)


@_launch.jit
def _sum_partials_kernel(part_ptr, out_ptr, n_groups, n_cols,
                         GROUPS: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr):
    """out[p, :] = sum over groups of part[p, g, :], in a fixed order, cast to out's dtype."""
    which = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    base = part_ptr + which * n_groups * n_cols
    acc = tl.full([GROUPS, BLOCK], 0.0, ACC)
    for g0 in range(0, n_groups, GROUPS):
        groups = g0 + tl.arange(0, GROUPS)
        ok = (groups < n_groups)[:, None] & col_ok[None, :]
        acc += tl.load(base + groups.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=ok, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + which * n_cols + cols, _rows.cast_for_store(total, out_ptr), mask=col_ok)


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


class Forward(NamedTuple):
    """What :func:`forward` produced. ``s``: the normalised rows (dropout-add-norm only, else None);
    ``mask``: the keep-mask (when asked); ``stats``: (3, rows) K, m, rstd for the backward (None
    when not stored)."""

    y: torch.Tensor
    s: torch.Tensor | None
    mask: torch.Tensor | None
    stats: torch.Tensor | None


# A call's host work is a dictionary lookup and its allocations: each direction keeps a plan per
# call signature (every input's layout, dtype, device and 16-byte alignment, the options): the
# tiles, grids and fixed kernel arguments worked out once, and launchers bound to them
# (``_launch.Kernel.bind``). A sweep that changes the knobs above calls ``_launch.forget_plans()``.
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()
_INT32_MAX = 2**31 - 1


def _vector_key(v: torch.Tensor | None) -> tuple[bool, bool] | None:
    """What decides how a per-column vector is passed: contiguous (else copied), 16-byte aligned."""
    return None if v is None else (v.is_contiguous(), v.data_ptr() & 15 == 0)


def _rows_key(t: torch.Tensor | None) -> tuple | None:
    """What decides how a (..., N) tensor is read as rows (beside a shape the caller checked)."""
    return None if t is None else (t.stride(), t.data_ptr() & 15 == 0)


def _dropout_key(dropout: Dropout | None) -> tuple[bool, bool] | None:
    """What dropout's parameters decide: whether it draws, and the seed's integer width."""
    return None if dropout is None else (dropout.threshold >= 0, dropout.seed > _INT32_MAX)


def forward(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *, eps: float, rms: bool,
    w_offset: float = 0.0, residual: torch.Tensor | None = None, xbias: torch.Tensor | None = None,
    dropout: Dropout | None = None, store_sum: bool = False, store_mask: bool = False, store_stats: bool = True,
) -> Forward:
    """Normalise the rows of ``x`` (or of ``dropout(x + xbias) + residual`` when ``dropout`` is given).

    Inputs are validated by the caller (residual: x's shape, dtype and device). ``store_sum`` asks
    for s (dropout-add-norm; always stored when a row spans several blocks, since the second pass
    reads it back). ``store_stats=False`` (no backward to come) leaves the row statistics
    unwritten and ``stats`` None: dropout-add-norm's graph-free forward, which ran 3.5-8.5% faster
    so on the H100. The plain norms store them anyway (docs/design-notes.md).
    """
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, _vector_key(weight), _vector_key(bias),
           _vector_key(xbias), _rows_key(residual), _dropout_key(dropout), rms, store_sum, store_mask, store_stats)
    plan = _FORWARD_PLANS.get(key)
    if plan is None:
        plan = _launch.remember(_FORWARD_PLANS, key, _ForwardPlan(
            x, weight, bias, residual, xbias, dropout, rms=rms, store_sum=store_sum, store_mask=store_mask,
            store_stats=store_stats))
    return plan(x, weight, bias, residual, xbias, eps, w_offset, dropout or _NO_DROPOUT)


class _ForwardPlan:
    """A forward call signature's tiles, outputs and bound launcher (see ``_FORWARD_PLANS``)."""

    def __init__(self, x, weight, bias, residual, xbias, dropout, *, rms, store_sum, store_mask, store_stats):
        dropout_add = dropout is not None
        n = x.shape[-1]
        tile = _tile(n, x.dtype, backward=False, dropout=dropout_add)
        split = tile.col_blocks > 1
        self.store_sum = dropout_add and (store_sum or split)
        self.store_mask, self.store_stats = store_mask, store_stats
        # Per-column vectors are read as dense rows: a strided one is copied (N elements); a row
        # layout that does not fold into (row, stride) groups is copied whole (_rows.row_layout).
        self.copy_vectors = any(v is not None and not v.is_contiguous() for v in (weight, bias, xbias))
        src = _rows.row_layout(x)
        res = _rows.row_layout(residual) if dropout_add else src
        self.copy_x, self.copy_residual = src.copied, dropout_add and res.copied
        self.stats_shape = (3, src.rows)
        self.stats_dtype = _stats_dtype(x.dtype)
        self.launch = None
        if x.numel() == 0:
            return
        weight, bias, xbias = self._vectors(weight, bias, xbias)
        outputs = self._outputs(src.tensor)
        drop = dropout or _NO_DROPOUT
        head = self._head(src.tensor, res.tensor, weight, bias, xbias, *outputs, 1e-5, 0.0, drop)
        fixed = (src.rows, n, float(n), *src.kernel_args(), *res.kernel_args())
        self.launch = _norm_fwd_kernel.bind(
            (triton.cdiv(src.rows, tile.rows),), head + fixed, dict(
                BLOCK=tile.block, ROWS=tile.rows, SPLIT=split, RMS=rms, HAS_W=weight is not None,
                HAS_B=bias is not None, DROPOUT_ADD=dropout_add, HAS_XBIAS=xbias is not None,
                DRAW=drop.threshold >= 0, STORE_SUM=self.store_sum, STORE_MASK=store_mask, STORE_STATS=store_stats,
                EVEN=even_tiles(src.rows, n, tile), num_warps=tile.num_warps, **_numerics(x.dtype),
            ), runtime=len(head))

    def _vectors(self, *vectors):
        if self.copy_vectors:
            return tuple(v.contiguous() if v is not None else None for v in vectors)
        return vectors

    def _outputs(self, x: torch.Tensor) -> tuple:
        """y, s, mask, stats for a call on x (s, mask, stats None where not stored)."""
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        stats = torch.empty(self.stats_shape, dtype=self.stats_dtype, device=x.device) if self.store_stats else None
        s = torch.empty_like(x, memory_format=torch.contiguous_format) if self.store_sum else None
        mask = torch.empty(x.shape, dtype=torch.bool, device=x.device) if self.store_mask else None
        return y, s, mask, stats

    @staticmethod
    def _head(x, residual, weight, bias, xbias, y, s, mask, stats, eps, w_offset, drop: Dropout) -> tuple:
        """The kernel's per-call arguments; an absent tensor stands in as another one, never read."""
        return (x, residual, x if xbias is None else xbias, x if weight is None else weight,
                x if bias is None else bias, y, y if s is None else s, y if mask is None else mask,
                y if stats is None else stats, eps, w_offset, *drop)

    def __call__(self, x, weight, bias, residual, xbias, eps: float, w_offset: float, drop: Dropout) -> Forward:
        if self.copy_x:
            x = x.contiguous()
        if self.copy_residual:
            residual = residual.contiguous()
        y, s, mask, stats = outputs = self._outputs(x)
        if self.launch is not None:
            if self.copy_vectors:
                weight, bias, xbias = self._vectors(weight, bias, xbias)
            self.launch(*self._head(x, x if residual is None else residual, weight, bias, xbias, *outputs, eps,
                                    w_offset, drop))
        return Forward(y, s, mask, stats)


# The forward masks nothing where every tile is full, for rows of up to this many columns. On the
# H100 (results/2026-11-24-h100-9, call 6, the gate against the masked kernel's baselines) that
# made LayerNorm 65536 x 256 bf16 4.0% faster and dropout-add-norm's 1024-column forwards 3-9%;
# wider even rows got slower (dropout-add-norm at 2048-16384 columns 4-19%, LayerNorm at 1024 x
# 16384 28%), and keep their masks.
EVEN_MAX_BLOCK = 1024


def even_tiles(n_rows: int, n: int, tile: _rows.RowTile) -> bool:
    """Whether the forward runs unmasked (:func:`_rows.even_tiles`, rows up to EVEN_MAX_BLOCK)."""
    return _rows.even_tiles(n_rows, n, tile, EVEN_MAX_BLOCK)


class Backward(NamedTuple):
    """Gradients from :func:`backward`; None where not asked for."""

    ds: torch.Tensor
    dx: torch.Tensor | None
    dweight: torch.Tensor | None
    dbias: torch.Tensor | None
    dxbias: torch.Tensor | None
    sums: torch.Tensor  # (parts, N): dweight, dbias, dxbias are its rows, in that order, where asked for


def backward(
    src: torch.Tensor, dy: torch.Tensor, weight: torch.Tensor | None, stats: torch.Tensor, *, rms: bool,
    w_offset: float = 0.0, dsum: torch.Tensor | None = None, dropout: Dropout | None = None,
    need_dweight: bool = False, need_dbias: bool = False, need_dxbias: bool = False,
) -> Backward:
    """Gradients of a :func:`forward` call.

    ``src`` is what was normalised (x, or the stored s of dropout-add-norm); ``dy`` the gradient of
    the output; ``dsum`` that of the returned prenorm sum, if any (both of src's shape, dtype and
    device); ``stats`` the forward's. ``ds`` is the gradient of the normalised rows; with
    ``dropout``, ``dx = ds * keep * scale`` is the gradient of the dropped input. dweight, dbias
    (of the norm) and dxbias (of the bias added before dropout) are column sums, reduced without
    atomics (module docstring).
    """
    key = (src.shape, src.stride(), src.dtype, src.device, src.data_ptr() & 15 == 0, _rows_key(dy), _rows_key(dsum),
           _vector_key(weight), _dropout_key(dropout), rms, need_dweight, need_dbias, need_dxbias)
    plan = _BACKWARD_PLANS.get(key)
    if plan is None:
        plan = _launch.remember(_BACKWARD_PLANS, key, _BackwardPlan(
            src, dy, weight, stats, dsum, dropout, rms=rms, need_dweight=need_dweight, need_dbias=need_dbias,
            need_dxbias=need_dxbias))
    return plan(src, dy, weight, stats, dsum, w_offset, dropout or _NO_DROPOUT)


class _BackwardPlan:
    """A backward call signature's tiles, buffers and bound launchers (see ``_BACKWARD_PLANS``)."""

    def __init__(self, src, dy, weight, stats, dsum, dropout, *, rms, need_dweight, need_dbias, need_dxbias):
        n = src.shape[-1]
        dtype = src.dtype
        self.dropout = dropout is not None
        self.need_dweight = need_dweight and weight is not None
        self.need_dbias = need_dbias
        self.need_dxbias = need_dxbias and dropout is not None
        self.parts = int(self.need_dweight) + int(self.need_dbias) + int(self.need_dxbias)
        self.n = n
        self.copy_weight = weight is not None and not weight.is_contiguous()
        s_rows, g_rows = _rows.row_layout(src), _rows.row_layout(dy)
        h_rows = _rows.row_layout(dsum) if dsum is not None else g_rows
        self.copy_src, self.copy_dy, self.copy_dsum = s_rows.copied, g_rows.copied, dsum is not None and h_rows.copied
        self.launches = ()
        if src.numel() == 0:
            return
        tile = _tile(n, dtype, backward=True, dropout=self.dropout)
        row_tiles = triton.cdiv(s_rows.rows, tile.rows)
        tiles_per_group = _tiles_per_group(src, row_tiles, tile.col_blocks, _bwd_programs_per_sm(tile.col_blocks > 1))
        groups = triton.cdiv(row_tiles, tiles_per_group)
        numerics = _numerics(dtype)
        acc_dtype = torch.float64 if numerics["ACC"] == tl.float64 else torch.float32
        self.partials_shape = ((self.parts, groups, n) if self.parts else (1,), acc_dtype)
        # The row sums of rows wider than a block; stats stands in where the one-block kernel never reads them.
        self.sums_given = tile.col_blocks > 1
        self.row_sums_shape = ((1 if rms else 2, tile.col_blocks, s_rows.rows), _stats_dtype(dtype))
        weight = weight.contiguous() if self.copy_weight else weight
        ds, dx, partials, row_sums, sums = self._buffers(s_rows.tensor, stats)
        drop = dropout or _NO_DROPOUT
        launches = []
        if self.sums_given:
            launches.append(_norm_bwd_row_sums_kernel.bind(
                (row_tiles, tile.col_blocks),
                (s_rows.tensor, g_rows.tensor, s_rows.tensor if weight is None else weight, stats, row_sums, 0.0,
                 s_rows.rows, n, *s_rows.kernel_args(), *g_rows.kernel_args()),
                dict(BLOCK=tile.block, ROWS=tile.rows, RMS=rms, HAS_W=weight is not None, COMPUTE=numerics["COMPUTE"],
                     num_warps=tile.num_warps),
                runtime=6))
        head = self._head(s_rows.tensor, g_rows.tensor, h_rows.tensor, weight, stats, row_sums, ds, dx, partials,
                          0.0, drop)
        launches.append(_norm_bwd_kernel.bind(
            (groups, tile.col_blocks),
            head + (s_rows.rows, n, float(n), tiles_per_group, *s_rows.kernel_args(), *g_rows.kernel_args(),
                    *h_rows.kernel_args()),
            dict(BLOCK=tile.block, ROWS=tile.rows, SUMS_GIVEN=self.sums_given, RMS=rms, HAS_W=weight is not None,
                 DW=self.need_dweight, DB=need_dbias, DXB=self.need_dxbias, DROPOUT=self.dropout,
                 DRAW=drop.threshold >= 0, HAS_DSUM=dsum is not None,
                 PREFETCH=_bwd_prefetch(n, dtype, rms, self.dropout), num_warps=tile.num_warps, **numerics),
            runtime=len(head)))
        if self.parts:
            group_tile, block = _rows.limits_for_backend(_GPU_PART, _INTERPRETER_PART)
            launches.append(_sum_partials_kernel.bind(
                (self.parts, triton.cdiv(n, block)), (partials, sums, groups, n),
                dict(GROUPS=group_tile, BLOCK=block, ACC=numerics["ACC"]), runtime=2))
        self.launches = tuple(launches)

    def _buffers(self, src: torch.Tensor, stats: torch.Tensor) -> tuple:
        """ds, dx (None without dropout), the partial sums, the row sums (stats where the kernel
        never reads them) and the column sums, for a call on src."""
        ds = torch.empty_like(src, memory_format=torch.contiguous_format)
        dx = torch.empty_like(src, memory_format=torch.contiguous_format) if self.dropout else None
        sums = torch.empty((self.parts, self.n), dtype=src.dtype, device=src.device)
        if src.numel() == 0:
            return ds, dx, None, None, sums.zero_()
        shape, dtype = self.partials_shape
        partials = torch.empty(shape, dtype=dtype, device=src.device)
        shape, dtype = self.row_sums_shape
        row_sums = torch.empty(shape, dtype=dtype, device=src.device) if self.sums_given else stats
        return ds, dx, partials, row_sums, sums

    @staticmethod
    def _head(src, dy, dsum, weight, stats, row_sums, ds, dx, partials, w_offset, drop: Dropout) -> tuple:
        """The backward kernel's per-call arguments; an absent tensor stands in as another, never read."""
        return (src, dy, dsum, src if weight is None else weight, stats, row_sums, ds, ds if dx is None else dx,
                partials, w_offset, *drop)

    def __call__(self, src, dy, weight, stats, dsum, w_offset: float, drop: Dropout) -> Backward:
        if self.copy_src:
            src = src.contiguous()
        if self.copy_dy:
            dy = dy.contiguous()
        if self.copy_dsum:
            dsum = dsum.contiguous()
        if self.copy_weight:
            weight = weight.contiguous()
        ds, dx, partials, row_sums, sums = self._buffers(src, stats)
        launches = self.launches
        if launches:
            if self.sums_given:
                launches[0](src, dy, src if weight is None else weight, stats, row_sums, w_offset)
            launches[1 if self.sums_given else 0](*self._head(
                src, dy, dy if dsum is None else dsum, weight, stats, row_sums, ds, dx, partials, w_offset, drop))
            if self.parts:
                launches[-1](partials, sums)
        return _assemble(ds, dx, sums, self.need_dweight, self.need_dbias, self.need_dxbias)


def _assemble(ds, dx, sums, need_dweight, need_dbias, need_dxbias) -> Backward:
    rows = iter(sums.unbind(0))
    return Backward(
        ds, dx,
        next(rows) if need_dweight else None,
        next(rows) if need_dbias else None,
        next(rows) if need_dxbias else None,
        sums,
    )
