"""Tiles and arithmetic dtypes of the normalisation kernels, chosen by measurement
(``benchmarks/tune_rows.py``'s sweeps on an H100; each table names its run, and
docs/performance.md has the timings).

Numerics: arithmetic in fp32 for fp16/bf16 inputs and in fp64 for fp32 and fp64 inputs
(``TUNING.wide_fp32``, below), results stored in the input dtype. With ``wide_fp32=False`` fp32 rows
compute in fp32 with correctly rounded divisions and ``sqrt_rn`` (Triton's defaults are
approximate on a GPU, which an fp32 output shows); fp16/bf16 results take the fast forms.

Everything a sweep may vary is an entry of ``TUNING`` (``kernels._tuning``), whose defaults are
the measured choices below; the plans read it, and ``benchmarks/tune_rows.py`` passes its
candidates in through ``TUNING.replaced(...)``.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels import _rows, _tuning
from kernels._runtime import sm_count

# ----------------------------------------------------------------------------------------------
# Tiling
# ----------------------------------------------------------------------------------------------
# GPU forward: rows up to 16384 columns stay in registers (one read, one write); a row of 16384 in
# fp32 registers plus the weight and bias blocks use 192 KB of the 256 KB register file at 32
# warps, so that is the ceiling. target_elems sets how many short rows share a program
# (dropout-add-norm takes fewer: _GPU_FWD_DROPOUT below). 64 bytes of input a thread (half the
# warps of 32): fewer warps make the row reductions cheaper, which makes LayerNorm's forward faster
# at every swept shape and leaves RMSNorm's level (chosen by benchmarks/tune_rows.py layer_norm and
# rms_norm on an H100, benchmarks/results/2026-11-23-h100-4).
# GPU backward: each program holds s, dy and the fp32 gradient accumulators of its block, four
# arrays of BLOCK, so its single-block limit is 8192. Wider rows are cut into column blocks of
# split_block (the row-sums kernel, then the column kernel: see the module docstring), with the
# rows and threads of _GPU_BWD_COLUMNS below.
# Interpreter: blocks of 64 so that CPU-sized rows (up to ~150 columns) exercise the multi-block
# paths. The interpreter's cost is per operation executed, nearly flat in the tile size, so the
# forward packs 16 rows per program (20 rows of 129 run in 160 ms, against 410 ms at 4 rows a
# program). The backward keeps 4 rows per tile so that CPU cases of a few rows already
# span several tiles and several row groups (the partials reduction), and rows of over 64 columns
# take the column kernels.
_GPU_FWD = _rows.TileLimits(max_block=16384, split_block=4096, target_elems=4096, max_rows=16, thread_bytes=64, max_warps=32)
_GPU_BWD = _rows.TileLimits(max_block=8192, split_block=1024, target_elems=4096, max_rows=16, thread_bytes=32, max_warps=16)
_INTERPRETER_FWD = _rows.TileLimits(max_block=64, split_block=64, target_elems=1024, max_rows=16, thread_bytes=32, max_warps=4)
_INTERPRETER_BWD = _rows.TileLimits(max_block=64, split_block=64, target_elems=256, max_rows=4, thread_bytes=32, max_warps=4)
# Backward row groups: on a GPU, this many programs per SM (each loops over its group's tiles);
# under the interpreter two tiles per group, so that small cases already produce several partials.
# Two programs an SM are the fastest count at nearly every shape, and 4 or 8 are much slower (chosen
# by benchmarks/tune_rows.py norm_backward_groups on an H100, benchmarks/results/2026-11-24-h100-3).
# Neither the partials reduction (summed by torch instead: no faster) nor the loop's pipelining
# depth (num_stages 1-5: level) explains that. Rows cut into column blocks take 4 an SM, shared
# among their column blocks (_GPU_BWD_COLUMN_PROGRAMS_PER_SM, below).
# TUNING.backward_programs_per_sm forces a count (tune_rows.py norm_backward_groups and
# norm_backward_columns).
_GPU_BWD_PROGRAMS_PER_SM = 2
_GPU_BWD_COLUMN_PROGRAMS_PER_SM = 4
# Prefetch: a program loads its next row tile before the arithmetic of this one, so that two
# tiles' loads are in flight (the GPU rule below prefetches only rows within one block; the
# interpreter runs it in column blocks too); Triton does not pipeline this loop itself
# (num_stages made no difference). It holds two tiles' inputs in registers, which helps some
# shapes and hurts others, so the measured rule (_bwd_prefetch) decides. TUNING.prefetch True or
# False forces it (tune_rows.py norm_backward_groups, norm_backward_prefetch).
# TUNING.columns_from: the narrowest row block that takes the column kernels (tune_rows.py
# norm_backward_columns_from); None: rows wider than the backward's max_block.
_INTERPRETER_TILES_PER_GROUP = 2
# Dropout draws four columns per Philox call, so a block is at least 4 wide.
_MIN_DROPOUT_BLOCK = 4


def _fwd_limits() -> _rows.TileLimits:
    return _rows.limits_for_backend(TUNING.forward, _INTERPRETER_FWD)


def _bwd_limits() -> _rows.TileLimits:
    return _rows.limits_for_backend(TUNING.backward, _INTERPRETER_BWD)


def block_boundaries() -> tuple[int, ...]:
    """Row lengths where the forward or backward tiling changes on this backend (test sizes),
    the GPU's per-shape overrides (below) included."""
    points = set(_rows.block_boundaries(_fwd_limits())) | set(_rows.block_boundaries(_bwd_limits()))
    if not _rows._SMALL_TILES:
        for limits in (TUNING.dropout_forward, TUNING.backward_columns, _GPU_BWD_NARROW16,
                       *(_dropout_bwd_limits(size) for size in (2, 4, 8))):
            points |= set(_rows.block_boundaries(limits))
        for low, high in (_NARROW16, _PREFETCH_RMS16, (_DROPOUT_FP32_BLOCK, _DROPOUT_FP32_BLOCK)):
            # row blocks low..high: rows of low // 2 + 1 to high columns
            points |= {low // 2, low // 2 + 1, high, high + 1}
    return tuple(sorted(points))


# GPU overrides: measured exceptions to the shared limits above, chosen by benchmarks/tune_rows.py
# on an H100 (norm_backward, dropout_norm_backward: benchmarks/results/2026-11-24-h100-2 and
# norm_backward_prefetch, dropout_norm_forward: 2026-11-24-h100-3). TUNING.overrides switches
# them all (below).
#
# Dropout-add-norm's forward: 1024 elements a program (one row of 1024, four of 256) instead of
# 4096, at the shared 64 bytes a thread: faster at every swept shape. Drawing the mask and the
# fp64 arithmetic of fp32 rows make its programs longer than a plain norm's, and smaller ones
# overlap better (on this tile fp64 arithmetic costs fp32 rows about 9% over fp32 arithmetic).
# Rows of 4096 columns or more take one row a program either way. Swept for dropout-add-LayerNorm;
# the RMSNorm form takes it too (same kernel and traffic). tune_rows.py dropout_norm_forward varies
# it itself.
_GPU_FWD_DROPOUT = _GPU_FWD._replace(target_elems=1024)
# Backward of rows wider than one block (the row-sums and column kernels): column blocks of 1024, 2
# rows a tile, 4 warps, 4 programs an SM, faster than 4 rows, 8 warps and 2 programs for
# LayerNorm, RMSNorm and dropout-add-LayerNorm; blocks of 512 are 1.4-2.6x slower, of 2048 within
# 2-11% (chosen by benchmarks/tune_rows.py norm_backward_columns, the backward alone at 1024 x
# 16384 bf16 on an H100, benchmarks/results/2026-11-24-h100-7). That target varies it.
_GPU_BWD_COLUMNS = _GPU_BWD._replace(target_elems=2048, thread_bytes=32)
# 16-bit backward rows of 512 to 1024: 64 bytes a thread (4 warps instead of 8), about a quarter
# faster for LayerNorm; at 256-wide rows (16 a tile) it is slower. RMSNorm is slightly slower so
# without prefetch and faster with it (_PREFETCH_RMS16).
_GPU_BWD_NARROW16 = _GPU_BWD._replace(thread_bytes=64)
_NARROW16 = (512, 1024)  # the row blocks it applies to (both norms)
# fp32 dropout-add-norm backward rows of 1024: one row a tile at 4 warps, with prefetch. Prefetch
# is slower on the 8 KB tile below, and for bf16 rows of 1024.
_GPU_BWD_DROPOUT_FP32 = _GPU_BWD._replace(target_elems=512, thread_bytes=32)
_DROPOUT_FP32_BLOCK = 1024  # the row block it and prefetch apply to (fp32 dropout-add-norm)
# Prefetch, where it is faster than the loop without it: 16-bit RMSNorm rows of 256 to 1024. Not
# LayerNorm: at rows of 1024 its backward alone is faster with it but forward+backward is slower;
# at 512 it ties, at 4096 it is slower, at 256 mixed.
_PREFETCH_RMS16 = (256, 1024)  # row blocks of 16-bit RMSNorm that prefetch
# Dropout-add-norm's backward, rows within one block: 8 KB of input a tile at 64 bytes a thread (4
# warps; _dropout_bwd_limits), faster than the shared tile at every swept shape. The RMSNorm form
# takes it too (same kernel and traffic; checked, not timed).
_DROPOUT_BWD_TILE_BYTES = 8192

# What a sweep may vary, with the measured choices as defaults. ``overrides`` switches the measured
# per-shape exceptions above (a sweep of the shared limits turns them off, so that each candidate
# is timed as given; the column kernels' limits are not one: rows wider than a block always take
# them). The forced counts and switches are None where the measured rule decides.
TUNING = _tuning.Tuning(
    "norms",
    forward=_GPU_FWD,
    backward=_GPU_BWD,
    dropout_forward=_GPU_FWD_DROPOUT,
    backward_columns=_GPU_BWD_COLUMNS,
    overrides=True,
    backward_programs_per_sm=None,
    prefetch=None,
    columns_from=None,
    wide_fp32=True,
)


def _dropout_bwd_limits(itemsize: int) -> _rows.TileLimits:
    return _GPU_BWD._replace(target_elems=_DROPOUT_BWD_TILE_BYTES // itemsize, thread_bytes=64)


def _gpu_bwd_limits(n: int, dtype: torch.dtype, dropout: bool) -> _rows.TileLimits:
    """The GPU backward's limits for rows of n elements: the shared ``TUNING.backward``, or the
    measured exception (above) that covers these rows (none while ``TUNING.overrides`` is off)."""
    block = _row_block(n)
    columns = _column_limits(block)
    if columns is not None:
        return columns
    if not TUNING.overrides:
        return TUNING.backward
    if dropout:
        return _GPU_BWD_DROPOUT_FP32 if _fp32_dropout_rows(block, dtype) else _dropout_bwd_limits(dtype.itemsize)
    if dtype.itemsize != 2:
        return TUNING.backward
    if _NARROW16[0] <= block <= _NARROW16[1]:
        return _GPU_BWD_NARROW16
    return TUNING.backward


def _row_block(n: int) -> int:
    """The power-of-two block a row of n elements rounds up to."""
    return triton.next_power_of_2(max(n, 1))


def _column_limits(block: int) -> _rows.TileLimits | None:
    """The GPU limits of the column kernels if rows of this power-of-two block take them (wider
    than the backward's max_block, or from TUNING.columns_from where a sweep sets it), else None."""
    first = 2 * TUNING.backward.max_block if TUNING.columns_from is None else TUNING.columns_from
    if block < first:
        return None
    columns = TUNING.backward_columns
    return columns._replace(max_block=min(columns.max_block, first // 2))


def _fp32_dropout_rows(block: int, dtype: torch.dtype) -> bool:
    """fp32 dropout-add-norm rows in the block that takes one row a tile with prefetch."""
    return dtype == torch.float32 and block == _DROPOUT_FP32_BLOCK


def _bwd_prefetch(n: int, dtype: torch.dtype, rms: bool, dropout: bool) -> bool:
    """Whether the backward prefetches row tiles for rows of n elements (the rule above). Under
    the interpreter by dtype and op alone, so that CPU tests run both forms of the loop."""
    if TUNING.prefetch is not None:
        return TUNING.prefetch
    sixteen = dtype.itemsize == 2
    if _rows._SMALL_TILES:
        return dtype == torch.float32 if dropout else sixteen
    block = _row_block(n)
    if not TUNING.overrides or _column_limits(block) is not None:
        return False
    if dropout:
        return _fp32_dropout_rows(block, dtype)
    if not sixteen:
        return False
    return rms and _PREFETCH_RMS16[0] <= block <= _PREFETCH_RMS16[1]


@functools.lru_cache(maxsize=1024)
def _tile(n: int, dtype: torch.dtype, backward: bool, dropout: bool) -> _rows.RowTile:
    if not backward:
        limits = TUNING.dropout_forward if dropout and TUNING.overrides and not _rows._SMALL_TILES else _fwd_limits()
    elif _rows._SMALL_TILES:
        limits = _INTERPRETER_BWD
    else:
        limits = _gpu_bwd_limits(n, dtype, dropout)
    tile = _rows.row_tile(n, dtype.itemsize, limits)
    if dropout and tile.block < _MIN_DROPOUT_BLOCK:
        tile = tile._replace(block=_MIN_DROPOUT_BLOCK)
    return tile


TUNING.forget_with(_tile.cache_clear)


# fp32 inputs compute in fp64: an fp32 result must come out within about one ulp, as eager's CPU
# LayerNorm does, and an fp32 chain of shift, centring, 1/std, weight and bias reaches 2-3 ulp
# (2.4x eager's envelope on a 9-wide row). On an H100 the fp64 pipe does 64 FMA per clock per SM,
# several times what fp32 rows at full bandwidth need (about 1.5 elements per clock per SM); the
# cost is registers (two per value). TUNING.wide_fp32 False gives fp32 arithmetic with correctly
# rounded division and square root instead (PRECISE), for a GPU where the fp64 kernels spill.


def _wide() -> tuple[torch.dtype, ...]:
    """The input dtypes whose rows compute in fp64."""
    return (torch.float32, torch.float64) if TUNING.wide_fp32 else (torch.float64,)


def _numerics(dtype: torch.dtype) -> dict:
    """COMPUTE: element arithmetic and row statistics. ACC: the weight-gradient partial sums.
    PRECISE: correctly rounded division and square root where COMPUTE is fp32 and results fp32."""
    return dict(
        COMPUTE=tl.float64 if dtype in _wide() else tl.float32,
        ACC=tl.float64 if dtype in (torch.float32, torch.float64) else tl.float32,
        PRECISE=dtype == torch.float32,
    )


def _stats_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype in _wide() else torch.float32


def _bwd_programs_per_sm(columns: bool) -> int:
    """Backward programs per SM (``columns``: rows cut into column blocks): the measured count, or
    the one a sweep forces."""
    if TUNING.backward_programs_per_sm is not None:
        return TUNING.backward_programs_per_sm
    return _GPU_BWD_COLUMN_PROGRAMS_PER_SM if columns else _GPU_BWD_PROGRAMS_PER_SM


def _tiles_per_group(t: torch.Tensor, row_tiles: int, col_blocks: int, programs_per_sm: int) -> int:
    """Row tiles per backward program: few partial rows, but enough programs (groups x column
    blocks) to fill the GPU."""
    if _rows._SMALL_TILES:
        return _INTERPRETER_TILES_PER_GROUP
    return _rows.tiles_per_group(row_tiles, max(1, programs_per_sm * sm_count(t.device) // col_blocks))

