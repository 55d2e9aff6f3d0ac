"""DLRM's dot interaction, forward and backward, in Triton.

``dlrm_interaction(dense, sparse)``: dense (batch, dim) is the bottom MLP's output, sparse
(batch, features, dim) the embedded categorical features. With ``Z = stack(dense, sparse)``
(batch, T = features + 1, dim), the result is ``concat(dense, strict lower triangle of Z Z^T)``
of shape (batch, dim + T (T - 1) / 2), the triangle in row-major order (pairs (1, 0), (2, 0),
(2, 1), (3, 0), ...: ``torch.tril_indices(T, T, -1)``), as DLRM's ``interact_features`` does.

Forward: one program per block of BLOCK_B samples. It loads the samples' Z in (BLOCK_B, BLOCK_T,
BLOCK_D) tiles, BLOCK_D columns at a time (row 0 from ``dense``, rows 1..F from ``sparse``, padding
rows and columns zero), sums all Gram matrices over the tiles with batched ``tl.dot`` and stores
the strict lower triangle straight into the output, beside the copy of ``dense``. The Gram matrix
never touches memory, and neither does Z (eager materialises both, plus the gathered triangle).

Backward: with ``g`` the gradient of the triangle and ``G`` the (T, T) matrix holding g below the
diagonal, ``dZ = (G + G^T) Z``. Each program gathers the symmetric ``G + G^T`` of its samples from
the gradient (element (i, j) and (j, i) both read pair (max, min); the diagonal is zero), multiplies
it by each BLOCK_D-column tile of Z (16-bit: a batched ``tl.dot``; fp32: below), and writes
``dsparse = dZ[:, 1:]`` and ``ddense = grad[:, :dim] + dZ[:, 0]`` (the dense vector reaches the
output twice). One program writes each gradient element: no atomics, repeated calls are bitwise
identical.

Numerics: fp16/bf16 products accumulate in fp32 in ``tl.dot`` (far finer than their results).
fp32 (``WIDE_SUM``) must not sum in fp32 chains: IEEE fp32 ``tl.dot`` is one running FMA sum per
output, and in one chain the backward's sum over 62 terms is 11 ulp off where eager's bmm is 3,
and the forward's over 251 columns 3.1x eager's error; chains of 16 terms added in fp64 still
reach 4.3x the envelope (a dense vector of scale 1e3 against unit sparse rows: each rounding of
the running sum is many ulps of a result that cancels).

The forward computes exact products on the tensor cores (``_matmul.split_gram``): each fp32 value
is cut into three bf16 pieces that add back to it exactly, and eight products of pieces (all but
the smallest, below 2^-28 of a product) are summed by the tensor cores, in five products (the
cross products come in transposed pairs): the head (the leading pieces' products) of each
16-column tile (``PARTIAL_TERMS``) from zero, the heads added in fp64, and half the cross
products, 2^-6 of the size, in one fp32 sum whose transpose adds the other half; one rounding to
fp32 at the end. Its errors are 0.3-1.4 eps of the terms' sum where eager's bmm has 2.9-3.8, and
it runs several times faster than torch.compile, where an FMA ``tl.dot`` is bound by bank
conflicts in its shared-memory operands and slower than compile (docs/performance.md).

The fp32 backward takes the same exact products (``_matmul.split_dot``, eight products of pieces)
over PARTIAL_TERMS rows of Z at a time: each head from zero, the heads added in fp64, the cross
products in one fp32 tail, with errors up to 2.75 eps of the terms' sum where eager's bmm has 6.8.
FMA partials (``tl.dot`` chains of 16 terms from zero, added in fp64) are faster only at dim 16
and exceed the envelope as above; exact outer products summed on the fp64 units are correctly
rounded but over four times slower at dim 64 (docs/performance.md). Triton 3.6 compiles no fp64
``tl.dot`` (Triton 3.8 does). ``ddense`` adds ``grad[:, :dim]`` in the accumulator's precision
(one rounding, where eager rounds twice). Any strides; outputs contiguous.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _launch, _ops, _rows
from kernels._matmul import dot, split_dot, split_gram
from kernels._validate import (
    FLOAT_DTYPES,
    check_same_device,
    check_same_dtype,
    check_shape,
    check_tensor,
)

OP = "dlrm_interaction"
DTYPES = FLOAT_DTYPES

# Elements per program on a GPU of each tl.dot operand: BLOCK_B samples of Z (BLOCK_T x BLOCK_D),
# and of the Gram matrix or G + G^T (BLOCK_T x BLOCK_T); under the interpreter two samples per
# program, so that CPU-sized batches span several programs and a partial block. A row wider than
# the tile allows is taken BLOCK_D columns at a time (the Gram matrix sums over the chunks, dZ is
# written chunk by chunk): the whole of a 65 x 257 Z in one tile needs 256 KB of shared memory for
# tl.dot's operands, over an H100's 227 KB, and 4 samples of a 128 x 128 fp32 G + G^T 353 KB
# (compiled for sm_90 on the CPU, tests/unit/test_dlrm_tiles.py). Under the interpreter the chunk
# is 16 columns, so CPU cases of dim > 16 take that loop.
# The column tiles are unrolled (D_TILES, a constexpr): as a runtime loop, even one that runs once,
# the 16-bit forward is a quarter slower and forward+backward nearly half (docs/performance.md);
# unrolled, the PTX for sm_90 is the same as straight-line code's, instruction for instruction.
# fp32 loops past GPU_UNROLLED_FP32_TILES (below).
# fp32 takes half that tile (and 8 warps where BLOCK_T > 32; up to 32 rows of Z it has its own
# swept launch, below): its fp64 accumulators (WIDE_SUM, above) need two registers a value, and
# 8192-element fp32 tiles at 4 warps already spill with tl.dot (4 samples x 32 x 64: 220 bytes
# forward, 1008 backward; that forward runs 4.7x slower). The benchmark shapes' tiles compile
# without spills (ptxas -v on the sm_90 PTX, tests/unit/test_dlrm_tiles.py). fp32's forward takes
# PARTIAL_TERMS columns a tile (each tile's head is one partial sum) and the backward
# PARTIAL_TERMS rows of Z a split product.
_GPU_TILE_ELEMS = 8192
_GPU_TILE_ELEMS_FP32 = 4096
_GPU_MAX_BLOCK_B = 16
PARTIAL_TERMS = tl.constexpr(16)
# The 16-bit forward at up to 32 rows of Z: 2 samples a program at 2 warps, the fastest tile at
# 65536 x 26 x {128, 64, 16} (at dim 128, 86% of copy bandwidth where the shared tile at 4 warps
# reaches 77%) and within 1% of the best at 8192 x 26 x 128 (chosen by benchmarks/tune_dlrm.py on
# an H100, benchmarks/results/2026-11-24-h100-2). The backward keeps the shared tile (not swept).
_GPU_FWD16_BLOCK_B = 2
_GPU_FWD16_WARPS = 2
# fp32's forward (WIDE_SUM) at up to 32 rows of Z: one sample a program at 1 warp, faster at 65536
# x 26 x {64, 16} than 2 warps (a 2-D product of one sample whose second warp repeats part of the
# first's work) and than 2 samples at 2 warps (measured on an H100,
# benchmarks/results/2026-11-24-h100-9). The one-warp tile holds 254 registers a thread (8 warps
# an SM; ncu: 5.8 cycles between a warp's instructions), and capping them (ptxas maxnreg 168 or
# 128) spills and is no faster.
_GPU_FP32_BLOCK_B = 1
_GPU_FP32_FORWARD_WARPS = 1
_INTERPRETER_BLOCK_B = 2
_INTERPRETER_BLOCK_D = 16
# fp32's kernels unroll up to this many column tiles and loop over more: each unrolled tile is
# several tensor-core products and the splits, and compiling for sm_90 took 2.5 s at 4 tiles and
# 31 s at 17 (dim 260, TF32 pieces; Triton 3.8 on the CPU), long enough to stall a GPU test run
# while it compiles. The benchmark shapes (dim 16 and 64) stay unrolled. Under the interpreter the
# loop starts at 3 tiles (dim 33 and up), so CPU runs take it.
GPU_UNROLLED_FP32_TILES = 4
UNROLLED_FP32_TILES = 2 if _rows._SMALL_TILES else GPU_UNROLLED_FP32_TILES
# fp32's backward unrolls its tiles of PARTIAL_TERMS rows of Z up to 32 rows (the benchmark shapes)
# and loops over more, for its compile time as above; under the interpreter it loops past 16 rows.
GPU_UNROLLED_FP32_K_TILES = 2
UNROLLED_FP32_K_TILES = 1 if _rows._SMALL_TILES else GPU_UNROLLED_FP32_K_TILES
# The piece type of fp32's split products (both kernels): with bf16 pieces the forward takes 22-28%
# less time than with TF32's (8 products 16 deep an instruction against 6 of 8), at a lower error
# (measured on an H100, benchmarks/results/2026-11-24-h100-6).
_PIECE = tl.constexpr("bf16")


# fp32's backward (WIDE_SUM) at up to 32 rows of Z: one sample a program, at 2 warps up to 32
# columns and 4 past: at 65536 x 26 x {16, 64, 128}, 2 warps are the fastest at dim 16 and 4 at dim
# 64 and 128 (within 0.4% of 2 at 128), ahead of 1 warp and of 2 samples at 2 warps (measured on
# an H100, benchmarks/results/2026-11-24-h100-9).
_GPU_FP32_BACKWARD_WARPS = 2
_GPU_FP32_BACKWARD_WIDE_WARPS = 4


def _gpu_fp32_backward_warps(block_d: int) -> int:
    """Warps of fp32's one-sample backward (above)."""
    return _GPU_FP32_BACKWARD_WARPS if block_d <= 32 else _GPU_FP32_BACKWARD_WIDE_WARPS


def _tiling(features: int, dim: int, dtype: torch.dtype, kernel: str) -> tuple[int, int, int, int]:
    """(BLOCK_B, BLOCK_T, BLOCK_D, num_warps) of ``kernel`` on the current backend."""
    if _rows._SMALL_TILES:
        block_t = max(16, triton.next_power_of_2(features + 1))
        return _INTERPRETER_BLOCK_B, block_t, min(max(16, triton.next_power_of_2(dim)), _INTERPRETER_BLOCK_D), 4
    return gpu_launch(features, dim, dtype, kernel)


def gpu_launch(features: int, dim: int, dtype: torch.dtype, kernel: str) -> tuple[int, int, int, int]:
    """(BLOCK_B, BLOCK_T, BLOCK_D, num_warps) of ``kernel`` ("forward" or "backward") on a GPU:
    the shared tile (``gpu_blocks``, ``num_warps``), but for the swept ones of the 16-bit forward and
    of fp32 at up to 32 rows of Z (above); fp32's forward takes PARTIAL_TERMS columns a tile."""
    if kernel not in ("forward", "backward"):
        raise ValueError(f"kernel must be 'forward' or 'backward', got {kernel!r}")
    if dtype == torch.float32:
        block_b, block_t, block_d = gpu_blocks(features, dim, dtype,
                                               max_block_d=PARTIAL_TERMS.value if kernel == "forward" else None)
        if block_t <= 32:
            warps = _GPU_FP32_FORWARD_WARPS if kernel == "forward" else _gpu_fp32_backward_warps(block_d)
            return _GPU_FP32_BLOCK_B, block_t, block_d, warps
        return block_b, block_t, block_d, num_warps(block_t, dtype)
    block_b, block_t, block_d = gpu_blocks(features, dim, dtype)
    if kernel == "forward" and block_t <= 32:
        return min(block_b, _GPU_FWD16_BLOCK_B), block_t, block_d, _GPU_FWD16_WARPS
    return block_b, block_t, block_d, num_warps(block_t, dtype)


def gpu_blocks(features: int, dim: int, dtype: torch.dtype, max_block_d: int | None = None) -> tuple[int, int, int]:
    """(BLOCK_B, BLOCK_T, BLOCK_D) on a GPU: tl.dot needs every tile side >= 16, and each operand
    stays within the dtype's tile (_GPU_TILE_ELEMS, or _GPU_TILE_ELEMS_FP32 for fp32); BLOCK_D at
    most ``max_block_d`` where given."""
    elems = _GPU_TILE_ELEMS_FP32 if dtype == torch.float32 else _GPU_TILE_ELEMS
    block_t = max(16, triton.next_power_of_2(features + 1))
    block_d = min(max(16, triton.next_power_of_2(dim)), max(16, elems // block_t), max_block_d or elems)
    block_b = max(1, min(_GPU_MAX_BLOCK_B, elems // (block_t * max(block_t, block_d))))
    return block_b, block_t, block_d


def num_warps(block_t: int, dtype: torch.dtype) -> int:
    """The shared tile's warps: 8 for fp32 (above) and once the Gram tile is 64 x 64 or more, 4
    otherwise (the swept launches of ``gpu_launch`` take their own)."""
    return 8 if block_t >= 64 or dtype == torch.float32 else 4


def block_boundaries() -> tuple[int, ...]:
    """Batch sizes where the tiling changes on the current backend (for test shapes)."""
    return (_INTERPRETER_BLOCK_B,) if _rows._SMALL_TILES else (_GPU_FP32_BLOCK_B, _GPU_FWD16_BLOCK_B, _GPU_MAX_BLOCK_B)


@triton.jit
def _load_dense(DENSE, offs_b, offs_d, B, D, sd_b, sd_d):
    """dense of BLOCK_B samples as (BLOCK_B, 1, len(offs_d)), zero outside."""
    b3 = offs_b.to(tl.int64)[:, None, None]
    d3 = offs_d[None, None, :]
    return tl.load(DENSE + b3 * sd_b + d3 * sd_d, mask=(b3 < B) & (d3 < D), other=0.0)


@triton.jit
def _load_z(DENSE, SPARSE, offs_b, offs_t, offs_d, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d):
    """Z of BLOCK_B samples as a (BLOCK_B, BLOCK_T, BLOCK_D) tile, zero outside; and dense alone
    as (BLOCK_B, 1, BLOCK_D)."""
    b3 = offs_b.to(tl.int64)[:, None, None]
    t3 = offs_t[None, :, None]
    d3 = offs_d[None, None, :]
    ok = (b3 < B) & (d3 < D)
    dense = _load_dense(DENSE, offs_b, offs_d, B, D, sd_b, sd_d)
    in_sparse = ok & (t3 >= 1) & (t3 <= F)
    z = tl.load(SPARSE + b3 * ss_b + (t3 - 1).to(tl.int64) * ss_f + d3 * ss_d, mask=in_sparse, other=0.0)
    z = tl.where(t3 == 0, dense, z)
    return z, dense


@triton.jit
def _matrix(x):
    """A (1, M, N) tile as (M, N)."""
    return tl.reshape(x, [x.shape[1], x.shape[2]])


@triton.jit
def _split_product(a, b, tail, BLOCK_B: tl.constexpr):
    """:func:`split_dot` of batched (BLOCK_B, M, K) and (BLOCK_B, K, N) fp32 tiles: (head, tail). A
    batch of one is taken as a 2-D product: a batched ``tl.dot`` on the tensor cores gives each
    warp whole samples, so the warps of a one-sample program would all compute the same one."""
    if BLOCK_B == 1:
        head, tail2 = split_dot(_matrix(a), _matrix(b), _matrix(tail), _PIECE)
        return tl.reshape(head, tail.shape), tl.reshape(tail2, tail.shape)
    else:
        return split_dot(a, b, tail, _PIECE)


@triton.jit
def _split_gram(z, tail, BLOCK_B: tl.constexpr):
    """:func:`split_gram` of a batched (BLOCK_B, T, K) fp32 tile: (head, tail), a batch of one as a
    2-D product (as :func:`_split_product`)."""
    if BLOCK_B == 1:
        z2 = _matrix(z)
        head, tail2 = split_gram(z2, tl.trans(z2), _matrix(tail), _PIECE)
        return tl.reshape(head, tail.shape), tl.reshape(tail2, tail.shape)
    else:
        return split_gram(z, tl.permute(z, (0, 2, 1)), tail, _PIECE)


@triton.jit
def _gram_tile(DENSE, SPARSE, out_row, b_ok, offs_b, offs_t, d_tile, gram, tail, B, F, D,
               sd_b, sd_d, ss_b, ss_f, ss_d,
               BLOCK_B: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, WIDE_SUM: tl.constexpr):
    """Column tile ``d_tile``: copies dense's columns to the output and adds the tile's Z Z^T to
    (gram, tail) (fp32: the head to gram in fp64, the cross products to tail; else all to gram)."""
    offs_d = d_tile * BLOCK_D + tl.arange(0, BLOCK_D)
    z, dense = _load_z(DENSE, SPARSE, offs_b, offs_t, offs_d, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d)
    d3 = offs_d[None, None, :]
    tl.store(out_row + d3, dense, mask=b_ok & (d3 < D))
    if WIDE_SUM:  # the cast keeps Triton from folding the head into a running sum
        head, tail = _split_gram(z, tail, BLOCK_B)
        gram += head.to(tl.float64)
    else:
        gram = dot(z, tl.permute(z, (0, 2, 1)), gram)
    return gram, tail


@_launch.jit
def _interaction_fwd_kernel(
    DENSE, SPARSE, OUT, B, F, D, out_cols, sd_b, sd_d, ss_b, ss_f, ss_d,
    BLOCK_B: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, D_TILES: tl.constexpr,
    WIDE_SUM: tl.constexpr, LOOP_D: tl.constexpr,
):
    offs_b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_t = tl.arange(0, BLOCK_T)
    out_row = OUT + offs_b.to(tl.int64)[:, None, None] * out_cols
    b_ok = (offs_b < B)[:, None, None]
    if WIDE_SUM:
        # fp32: exact products on the tensor cores (split_gram), each column tile's head summed from
        # zero and added in fp64, the small cross products in one fp32 tail (module docstring)
        tl.static_assert(BLOCK_D <= PARTIAL_TERMS)
        gram = tl.zeros([BLOCK_B, BLOCK_T, BLOCK_T], tl.float64)
        tail = tl.zeros([BLOCK_B, BLOCK_T, BLOCK_T], tl.float32)
    else:
        gram = tl.zeros([BLOCK_B, BLOCK_T, BLOCK_T], tl.float32)
        tail = gram  # unused
    if LOOP_D:
        for d_tile in range(0, D_TILES):
            gram, tail = _gram_tile(DENSE, SPARSE, out_row, b_ok, offs_b, offs_t, d_tile, gram, tail, B, F, D,
                                    sd_b, sd_d, ss_b, ss_f, ss_d, BLOCK_B, BLOCK_T, BLOCK_D, WIDE_SUM)
    else:
        for d_tile in tl.static_range(D_TILES):
            gram, tail = _gram_tile(DENSE, SPARSE, out_row, b_ok, offs_b, offs_t, d_tile, gram, tail, B, F, D,
                                    sd_b, sd_d, ss_b, ss_f, ss_d, BLOCK_B, BLOCK_T, BLOCK_D, WIDE_SUM)
    if WIDE_SUM:  # split_gram's tail holds half the cross products, their transposes the rest
        gram += (tail + tl.permute(tail, (0, 2, 1))).to(tl.float64)
    i = offs_t[None, :, None]
    j = offs_t[None, None, :]
    lower = b_ok & (i > j) & (i <= F)
    tl.store(out_row + (D + i * (i - 1) // 2 + j), _rows.cast_for_store(gram, OUT), mask=lower)


@triton.jit
def _symmetric_grad(grad_row, sg_c, b_ok, rows, cols, D, F):
    """(BLOCK_B, len(rows), len(cols)) of G + G^T: element (i, j) is the gradient of pair
    (max(i, j), min(i, j)); zero on the diagonal and past the F + 1 rows of Z."""
    i = rows[None, :, None]
    j = cols[None, None, :]
    hi = tl.maximum(i, j)
    lo = tl.minimum(i, j)
    pair = (D + hi * (hi - 1) // 2 + lo).to(tl.int64)
    return tl.load(grad_row + pair * sg_c, mask=b_ok & (i != j) & (hi <= F), other=0.0)


@triton.jit
def _grad_k_tile(DENSE, SPARSE, grad_row, sg_c, b_ok, offs_b, offs_t, offs_d, k_tile, dz, tail, B, F, D,
                  sd_b, sd_d, ss_b, ss_f, ss_d, BLOCK_B: tl.constexpr):
    """fp32's (dz, tail) after the PARTIAL_TERMS rows of Z of ``k_tile``: the split product of
    those columns of G + G^T and those rows of Z, its head added to dz in fp64."""
    offs_k = k_tile * PARTIAL_TERMS + tl.arange(0, PARTIAL_TERMS)
    g = _symmetric_grad(grad_row, sg_c, b_ok, offs_t, offs_k, D, F)
    z, _ = _load_z(DENSE, SPARSE, offs_b, offs_k, offs_d, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d)
    head, tail = _split_product(g, z, tail, BLOCK_B)
    return dz + head.to(tl.float64), tail


@triton.jit
def _grad_tile(DENSE, SPARSE, DDENSE, DSPARSE, grad_row, b3, b_ok, offs_b, offs_t, d_tile, B, F, D,
               sd_b, sd_d, ss_b, ss_f, ss_d, sg_c,
               BLOCK_B: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, WIDE_SUM: tl.constexpr,
               LOOP_K: tl.constexpr):
    """Column tile ``d_tile`` of dZ = (G + G^T) Z: writes its columns of dsparse and ddense."""
    offs_d = d_tile * BLOCK_D + tl.arange(0, BLOCK_D)
    t3 = offs_t[None, :, None]
    if WIDE_SUM:
        # fp32: PARTIAL_TERMS rows of Z at a time, in exact products on the tensor cores
        # (split_dot): each head summed from zero and added in fp64, the cross products in one
        # fp32 tail (module docstring)
        tl.static_assert((BLOCK_T // PARTIAL_TERMS) * PARTIAL_TERMS == BLOCK_T)
        dz = tl.zeros([BLOCK_B, BLOCK_T, BLOCK_D], tl.float64)
        tail = tl.zeros([BLOCK_B, BLOCK_T, BLOCK_D], tl.float32)
        if LOOP_K:
            for k_tile in range(0, BLOCK_T // PARTIAL_TERMS):
                dz, tail = _grad_k_tile(DENSE, SPARSE, grad_row, sg_c, b_ok, offs_b, offs_t, offs_d, k_tile,
                                        dz, tail, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d, BLOCK_B)
        else:
            for k_tile in tl.static_range(BLOCK_T // PARTIAL_TERMS):
                dz, tail = _grad_k_tile(DENSE, SPARSE, grad_row, sg_c, b_ok, offs_b, offs_t, offs_d, k_tile,
                                        dz, tail, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d, BLOCK_B)
        dz += tail.to(tl.float64)
    else:
        g = _symmetric_grad(grad_row, sg_c, b_ok, offs_t, offs_t, D, F)
        z, _ = _load_z(DENSE, SPARSE, offs_b, offs_t, offs_d, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d)
        dz = dot(g, z, tl.zeros([BLOCK_B, BLOCK_T, BLOCK_D], tl.float32))
    d3 = offs_d[None, None, :]
    d_ok = d3 < D
    # dsparse[b, t - 1] = dZ[b, t] for t in 1..F (contiguous (B, F, D)).
    dsparse_ptr = DSPARSE + (b3 * F + (t3 - 1)) * D + d3
    tl.store(dsparse_ptr, _rows.cast_for_store(dz, DSPARSE), mask=b_ok & d_ok & (t3 >= 1) & (t3 <= F))
    # ddense = grad[:, :D] + dZ[:, 0], one rounding
    dz0 = tl.sum(tl.where(t3 == 0, dz, 0.0), axis=1)[:, None, :]
    g_dense = tl.load(grad_row + d3 * sg_c, mask=b_ok & d_ok, other=0.0).to(dz.dtype)
    tl.store(DDENSE + b3 * D + d3, _rows.cast_for_store(g_dense + dz0, DDENSE), mask=b_ok & d_ok)


@_launch.jit
def _interaction_bwd_kernel(
    DENSE, SPARSE, GRAD, DDENSE, DSPARSE, B, F, D, sd_b, sd_d, ss_b, ss_f, ss_d, sg_b, sg_c,
    BLOCK_B: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, D_TILES: tl.constexpr,
    WIDE_SUM: tl.constexpr, LOOP_D: tl.constexpr, LOOP_K: tl.constexpr,
):
    offs_b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_t = tl.arange(0, BLOCK_T)
    b3 = offs_b.to(tl.int64)[:, None, None]
    b_ok = b3 < B
    grad_row = GRAD + b3 * sg_b
    if LOOP_D:
        for d_tile in range(0, D_TILES):
            _grad_tile(DENSE, SPARSE, DDENSE, DSPARSE, grad_row, b3, b_ok, offs_b, offs_t, d_tile, B, F, D,
                       sd_b, sd_d, ss_b, ss_f, ss_d, sg_c, BLOCK_B, BLOCK_T, BLOCK_D, WIDE_SUM, LOOP_K)
    else:
        for d_tile in tl.static_range(D_TILES):
            _grad_tile(DENSE, SPARSE, DDENSE, DSPARSE, grad_row, b3, b_ok, offs_b, offs_t, d_tile, B, F, D,
                       sd_b, sd_d, ss_b, ss_f, ss_d, sg_c, BLOCK_B, BLOCK_T, BLOCK_D, WIDE_SUM, LOOP_K)


def column_tiles(d_tiles: int, dtype: torch.dtype, unrolled: int | None = None) -> dict:
    """Both kernels' constexprs for ``d_tiles`` column tiles: D_TILES, WIDE_SUM (fp32) and LOOP_D
    (fp32 past ``unrolled`` tiles, by default this backend's UNROLLED_FP32_TILES)."""
    wide = dtype == torch.float32
    limit = UNROLLED_FP32_TILES if unrolled is None else unrolled
    return dict(D_TILES=d_tiles, WIDE_SUM=wide, LOOP_D=wide and d_tiles > limit)


def loop_k(block_t: int, dtype: torch.dtype, unrolled: int | None = None) -> bool:
    """LOOP_K of the backward: fp32 loops over its PARTIAL_TERMS-row tiles of Z past ``unrolled``
    of them (by default this backend's UNROLLED_FP32_K_TILES)."""
    limit = UNROLLED_FP32_K_TILES if unrolled is None else unrolled
    return dtype == torch.float32 and block_t // PARTIAL_TERMS.value > limit


def _forward(dense: torch.Tensor, sparse: torch.Tensor,
             launch: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """The interaction of validated inputs; ``launch`` (BLOCK_B, BLOCK_T, BLOCK_D, num_warps)
    replaces the production choice, for a tiling sweep (benchmarks/tune_dlrm.py)."""
    batch, dim = dense.shape
    features = sparse.shape[1]
    t = features + 1
    out_cols = dim + t * (t - 1) // 2
    out = torch.empty((batch, out_cols), dtype=dense.dtype, device=dense.device)
    if out.numel() == 0:
        return out
    block_b, block_t, block_d, warps = launch or _tiling(features, dim, dense.dtype, "forward")
    with _rows.launch_guard(dense):
        _interaction_fwd_kernel[(triton.cdiv(batch, block_b),)](
            dense, sparse, out, batch, features, dim, out_cols, *dense.stride(), *sparse.stride(),
            BLOCK_B=block_b, BLOCK_T=block_t, BLOCK_D=block_d, **column_tiles(triton.cdiv(dim, block_d), dense.dtype),
            num_warps=warps,
        )
    return out


def _backward(dense, sparse, grad, launch: tuple[int, int, int, int] | None = None):
    """The gradients of validated inputs; ``launch`` as for ``_forward``."""
    batch, dim = dense.shape
    features = sparse.shape[1]
    ddense = torch.empty((batch, dim), dtype=dense.dtype, device=dense.device)
    dsparse = torch.empty((batch, features, dim), dtype=dense.dtype, device=dense.device)
    if batch == 0 or dim == 0:
        return ddense, dsparse
    block_b, block_t, block_d, warps = launch or _tiling(features, dim, dense.dtype, "backward")
    with _rows.launch_guard(dense):
        _interaction_bwd_kernel[(triton.cdiv(batch, block_b),)](
            dense, sparse, grad, ddense, dsparse, batch, features, dim,
            *dense.stride(), *sparse.stride(), *grad.stride(),
            BLOCK_B=block_b, BLOCK_T=block_t, BLOCK_D=block_d, **column_tiles(triton.cdiv(dim, block_d), dense.dtype),
            LOOP_K=loop_k(block_t, dense.dtype), num_warps=warps,
        )
    return ddense, dsparse


class _Interaction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dense, sparse):
        ctx.save_for_backward(dense, sparse)
        return _forward(dense, sparse)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        dense, sparse = ctx.saved_tensors
        if grad.dtype != dense.dtype:  # autograd may hand a grad of another dtype; never mutate it
            grad = grad.to(dense.dtype)
        ddense, dsparse = _backward(dense, sparse, grad)
        return (ddense if ctx.needs_input_grad[0] else None), (dsparse if ctx.needs_input_grad[1] else None)


# The custom ops (kernels/_ops.py): the same launchers as the eager path, so bitwise the same.


@_ops.op("dlrm_interaction", "(Tensor dense, Tensor sparse) -> Tensor")
def dlrm_interaction_op(dense, sparse):
    """:func:`dlrm_interaction` as a custom op."""
    return _forward(dense, sparse)


@dlrm_interaction_op.register_fake
def _(dense, sparse):
    t = sparse.shape[1] + 1
    return dense.new_empty((dense.shape[0], dense.shape[1] + t * (t - 1) // 2))


@_ops.op("dlrm_interaction_backward", "(Tensor dense, Tensor sparse, Tensor grad) -> Tensor[]")
def dlrm_interaction_backward(dense, sparse, grad):
    """[ddense, dsparse]: the kernel writes both in one pass, whichever are needed."""
    return list(_backward(dense, sparse, grad))


@dlrm_interaction_backward.register_fake
def _(dense, sparse, grad):
    return [_ops.empty_like(dense), _ops.empty_like(sparse)]


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward_formula(ctx, grad):
    dense, sparse = ctx.saved_tensors
    ddense, dsparse = dlrm_interaction_backward(dense, sparse, grad.to(dense.dtype))
    need_dense, need_sparse = ctx.needs_input_grad
    return (ddense if need_dense else None), (dsparse if need_sparse else None)


dlrm_interaction_op.register_autograd(_backward_formula, setup_context=_setup)


def dlrm_interaction(dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
    """``concat(dense, strict lower triangle of Z Z^T)`` with ``Z = stack(dense, sparse)``.

    dense: (batch, dim); sparse: (batch, features, dim); one dtype (float32, float16, bfloat16),
    one device, any strides. Returns a contiguous (batch, dim + T (T - 1) / 2) tensor, T =
    features + 1, pairs in ``torch.tril_indices(T, T, -1)`` order; differentiable in both inputs.

    Raises TypeError for a non-tensor or an unsupported or mismatched dtype; ValueError for a wrong
    rank, mismatched batch or dim, or a wrong device.
    """
    check_tensor(OP, "dense", dense, dtypes=DTYPES, ndim=2)
    check_tensor(OP, "sparse", sparse, dtypes=DTYPES, ndim=3)
    check_same_device(OP, dense=dense, sparse=sparse)
    check_same_dtype(OP, dense=dense, sparse=sparse)
    check_shape(OP, "sparse", sparse, (dense.shape[0], sparse.shape[1], dense.shape[1]),
                "(batch, features, dim), batch and dim those of dense")
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return dlrm_interaction_op(dense, sparse)
    if torch.is_grad_enabled() and (dense.requires_grad or sparse.requires_grad):
        return _Interaction.apply(dense, sparse)
    return _forward(dense, sparse)
