"""Triton helpers of the normalisation kernels (``kernels/_norm_kernels.py``): where a row comes
from, its statistics, and dropout's keep-mask.

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
  row's sum biased by K, and its fp32 sum is ulps of K off (:func:`_block_mean`).
* **Dropout** (:func:`keep_mask`): a counter-based Philox stream, one ``tl.philox`` call per four
  columns, counters ``(column // 4, row)``, key = the seed. The mask depends only on the seed and
  the element's logical position (not on strides, tiling or the backend), so the backward
  regenerates it instead of reading a stored mask. An element is kept when 31 random bits are
  ``>= round(p * 2^31)``: p = 0 keeps everything exactly, p = 1 nothing.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels import _rows

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
    the fp32 tree sum of it and the GPU's approximate division are several ulps of the bias off
    (in a bf16 row of 8193 normal values, enough to put the output 2 bf16 ulps off near the mean,
    2.12x the envelope). The deviations have mean -error, so their sum rounds like a random walk
    and returns the error; the deviations stay about m, so the variance moves by the square of the
    correction. The refinement is a third row reduction: it would cost LayerNorm's forward a tenth
    of its time at 256 columns, and costs nothing measurable from 2048 (docs/performance.md);
    shorter blocks sum few terms (a tree sum of 256-1024 biased terms, emulated in numpy: within
    1.05 ulps). fp64 arithmetic needs no refinement."""
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

