"""The normalisation kernels: one forward and one backward kernel serve LayerNorm, RMSNorm and
dropout-add-norm, specialised by ``tl.constexpr`` flags (each op compiles only its own variant),
with the backward's row-sums and partial-sums kernels. Their launches are ``kernels/_norm.py``'s
plans; their tiles, ``kernels/_norm_tiling.py``'s.

Forward (``_norm.forward``): a row that fits one block (up to 16384 columns on a GPU) is read once,
held in registers and written once; the statistics of each row (``K``, ``m``, ``rstd``) are stored
for the backward (3 values a row in the statistics' dtype), unless no backward will read them
(``store_stats``). Several short rows share a program; where every tile is full and the rows are
short, the kernel masks nothing (``_norm.even_tiles``). Weight, bias and xbias load through the
tile's own [ROWS, BLOCK] offsets (``_rows.across_rows``), so that Triton keeps the tile in one
layout instead of moving it through shared memory. A wider row is streamed twice: statistics,
then normalisation (re-reading ``x``, or the stored ``s`` for dropout-add-norm).

Backward (``_norm.backward``): one pass over rows that fit one block. Each program walks a fixed
group of row tiles and keeps the weight/bias gradient contributions (``dy * xhat``, ``dy``, and for
dropout-add-norm the gradient of the dropped input's bias) in registers; it writes one partial row
per group, and a small kernel (``kernels/_partials.py``) adds the partials of all groups in a
fixed order. No atomics: results are bitwise reproducible. The partials are fp64 for fp32/fp64
inputs (the sums of many rows then add no error of their own) and fp32 for fp16/bf16. A row wider
than one block is cut into column blocks, and two kernels share the work:
:func:`_norm_bwd_row_sums_kernel` writes each row's sums of ``g * xhat`` and ``g`` per column
block (one program per row tile and column block), then the backward kernel runs one program per
row group and column block and takes the row means ``c1``, ``c2`` from those sums (added in a
fixed order). s and dy are read twice, but every program streams independent tiles and the
partial rows are as few as the row groups: faster than a two-pass loop per row tile that keeps a
full-width partial row per group in L2 and walks its tiles one after another (docs/performance.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels import _launch, _rows
from kernels._norm_stats import (_dropped, _normalized, _scale_vector, _shift, _source, _stats_add, _stats_finish,
                                  _stats_init, keep_mask)

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
