"""Tile matrix products shared by the tensor-core kernels (flash attention, DLRM interaction,
linear+activation, LoRA).

:func:`dot` is ``tl.dot`` with the accumulation the references assume: fp32 accumulation of exact
products for fp16/bf16 tiles (the tensor cores' native mode), and IEEE fp32 for fp32 tiles (never
TF32, which would round the inputs to 10 mantissa bits where eager fp32 matmuls keep 23).

Triton's CPU interpreter computes bf16 products on the raw 16-bit patterns (``tl.dot`` of two bf16
tiles is garbage there), so under the interpreter bf16 tiles are widened to fp32 first. The widening
is exact and the fp32 product of two bf16 values is exact, so the result is the same fp32-accumulated
product the GPU computes natively; on a GPU the bf16 tiles go to the tensor cores unchanged.

:func:`split_dot` is the fp32 product on the tensor cores with every product exact: each fp32 tile
is cut into three pieces that bf16 (or TF32) holds exactly (:func:`split_pieces`), and the products
of the pieces that matter (8 of bf16's 9, 6 of TF32's) make up ``a @ b`` but for terms below 2^-28
of each product. :func:`split_gram` is the same for a Gram product ``a @ a^T``, whose cross
products come in transposed pairs: 5 tensor-core products carry bf16's 8 (4 carry TF32's 6).
IEEE fp32 ``tl.dot`` runs on the FMA units, from operands staged in shared memory in a layout
Triton chooses, where dlrm_interaction's fp32 forward is bound by bank conflicts (ncu: L1/TEX 97%
busy) and slower than torch.compile; split into bf16 pieces it is more than twice as fast as
torch.compile (docs/performance.md). IEEE fp32 ``tl.dot`` also rounds a running FMA sum after
every term, which a split product's tensor-core sums do not.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._runtime import interpreting

_WIDEN_BF16 = tl.constexpr(interpreting())
_FP32_MAX = tl.constexpr(3.4028234663852886e38)


@triton.jit
def dot(a, b, acc):
    """``acc + a @ b`` (2-D or batched 3-D tiles), accumulated in ``acc``'s dtype (fp32 or fp64)."""
    if _WIDEN_BF16 and a.dtype == tl.bfloat16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    elif a.dtype == tl.float32:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def k_loop(acc, x_ptrs, w_ptrs, K, stride_wk, rk, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """``acc + X @ W`` over the K dimension, BLOCK_K at a time: ``x_ptrs`` points at a
    (BLOCK_M, BLOCK_K) tile of X (K contiguous), ``w_ptrs`` at a (BLOCK_K, BLOCK_N) tile of W whose
    K stride is ``stride_wk``; ``rk`` is ``tl.arange(0, BLOCK_K)``. Rows and columns are the
    caller's to mask or wrap; only a ragged last K block is masked here (``EVEN_K`` false)."""
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(x_ptrs)
            b = tl.load(w_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(x_ptrs, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(w_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
    return acc


@triton.jit
def _head(x, PIECE: tl.constexpr):
    """fp32 x with the low bits of its significand cleared that the piece type drops (TF32: 13,
    bf16: 16): a value that type holds exactly (the tensor cores read an fp32 operand's top 19
    bits as TF32, so it enters them unchanged), within 2^-10 |x| (bf16: 2^-7 |x|) of x."""
    if PIECE == "bf16":
        return (x.to(tl.int32, bitcast=True) & -65536).to(tl.float32, bitcast=True)
    else:
        return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def split_pieces(x, PIECE: tl.constexpr):
    """fp32 x as (hi, mid, lo) fp32 tiles with hi + mid + lo == x exactly, each piece exact in
    PIECE ("tf32" or "bf16") for x of magnitude 2^-110 (TF32: 2^-113) or more, and zero; below,
    lo has bits under the piece type's least subnormal.

    hi keeps x's top 11 (bf16: 8) significant bits; the rest r = x - hi (exact: the bits below
    hi's) is below 2^-10 |x| (2^-7), and mid keeps r's top bits, leaving lo < 2^-20 |x| of at most
    2 bits (2^-14 |x|, at most 8 bits). An infinity is its own hi (its significand is zero), with
    mid = lo = 0 (not inf - inf). A NaN's mid and lo are NaN (its hi is an infinity where its
    payload lay in the cleared bits), so any product with it is NaN."""
    hi = _head(x, PIECE)
    r = tl.where(hi == x, 0.0, x - hi)
    mid = _head(r, PIECE)
    return hi, mid, r - mid


@triton.jit
def _piece_dot(a, b, acc, PIECE: tl.constexpr):
    if PIECE == "bf16":
        return dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
    else:
        return tl.dot(a, b, acc, input_precision="tf32")


@triton.jit
def _finite(hi):
    """A head with its infinities as 0, for the cross products (an infinity's mid and lo are 0, and
    inf * 0 would be NaN there)."""
    return tl.where(tl.abs(hi) <= _FP32_MAX, hi, 0.0)


@triton.jit
def split_dot(a, b, tail, PIECE: tl.constexpr):
    """(head, tail + rest) of fp32 ``a @ b`` (2-D or batched 3-D tiles) on the tensor cores, with
    ``a @ b == head + rest`` but for terms below 2^-29 (bf16 pieces: 2^-28) of each product.

    head is ``hi(a) @ hi(b)`` (:func:`split_pieces`): the tensor cores' fp32 sum, from zero, of
    exact products; the caller keeps it apart (a caller that adds it onto a running fp32 sum gets
    Triton's folding of that add into one long chain). rest is the cross products that matter,
    each product exact, together below 2^-9 (bf16: 2^-6) of the products' magnitudes; they
    accumulate onto ``tail``, so each addition's fp32 rounding is that far below fp32's unit
    roundoff of the products (a tail carried over n calls adds up to n of them). TF32 pieces:
    hi-mid, mid-hi, mid-mid, hi-lo, lo-hi (mid-lo, lo-mid, lo-lo below 2^-30 are left out); bf16
    pieces (a 16-deep product per instruction where TF32 takes 8) add mid-lo and lo-mid and leave
    out lo-lo (below 2^-28). Infinite elements take part in head only (in the cross products they
    count as 0), so that inf * 0 cannot turn into NaN there.

    Summing a tile's products in one chain instead, head last onto the cross products, is slower
    (dlrm_interaction's forward at dim 64: docs/performance.md)."""
    a_hi, a_mid, a_lo = split_pieces(a, PIECE)
    b_hi, b_mid, b_lo = split_pieces(b, PIECE)
    head = _piece_dot(a_hi, b_hi, tl.zeros(tail.shape, tl.float32), PIECE)
    a_fin = _finite(a_hi)
    b_fin = _finite(b_hi)
    if PIECE == "bf16":
        tail = _piece_dot(a_mid, b_lo, tail, PIECE)
        tail = _piece_dot(a_lo, b_mid, tail, PIECE)
    tail = _piece_dot(a_mid, b_mid, tail, PIECE)
    tail = _piece_dot(a_lo, b_fin, tail, PIECE)
    tail = _piece_dot(a_fin, b_lo, tail, PIECE)
    tail = _piece_dot(a_mid, b_fin, tail, PIECE)
    tail = _piece_dot(a_fin, b_mid, tail, PIECE)
    return head, tail


@triton.jit
def split_gram(a, a_t, tail, PIECE: tl.constexpr):
    """(head, tail + half) of the fp32 Gram product ``a @ a^T`` (2-D or batched 3-D tiles; ``a_t``
    is ``a`` transposed) on the tensor cores, with ``a @ a^T == head + half + half^T`` but for
    terms below 2^-29 (bf16 pieces: 2^-28) of each product. The caller adds ``tail + tail^T`` to
    its sum once, after its last tile.

    head is ``hi(a) @ hi(a)^T`` (:func:`split_pieces`): the tensor cores' fp32 sum, from zero, of
    exact products; the caller keeps it apart (a caller that adds it onto a running fp32 sum gets
    Triton's folding of that add into one long chain). The cross products of a Gram matrix come in
    transposed pairs, ``mid @ hi^T`` and ``hi @ mid^T`` = its transpose, so half holds one of each
    pair and half of the symmetric ``mid @ mid^T``: ``mid @ hi^T + lo @ hi^T + (mid / 2) @ mid^T``,
    and with bf16 pieces ``mid @ lo^T`` too (3 and 4 tensor-core products where a general product
    takes 5 and 7). Halving mid is exact down to 2^-117 |a|, where split_pieces' own exactness
    ends. Each cross product is exact and together they are below 2^-9 (bf16: 2^-6) of the
    products' magnitudes; they accumulate onto ``tail``, so each addition's fp32 rounding is that
    far below fp32's unit roundoff of the products (a tail carried over n calls adds up to n of
    them). What ``tail`` held on entry is added with its transpose too: a caller starts it at zero.
    Left out: TF32's mid-lo, lo-mid and lo-lo, below 2^-30; bf16's lo-lo, below 2^-28.
    Infinite elements take part in head only (in the cross products their hi counts as 0), so
    that inf * 0 cannot turn into NaN there.

    Summing a tile's products in one chain instead, head last onto the cross products, is slower
    (dlrm_interaction's forward at dim 64: docs/performance.md)."""
    hi, mid, lo = split_pieces(a, PIECE)
    hi_t, mid_t, lo_t = split_pieces(a_t, PIECE)
    head = _piece_dot(hi, hi_t, tl.zeros(tail.shape, tl.float32), PIECE)
    hi_t_fin = _finite(hi_t)
    if PIECE == "bf16":
        tail = _piece_dot(mid, lo_t, tail, PIECE)
    tail = _piece_dot(mid, mid_t * 0.5, tail, PIECE)
    tail = _piece_dot(lo, hi_t_fin, tail, PIECE)
    tail = _piece_dot(mid, hi_t_fin, tail, PIECE)
    return head, tail
