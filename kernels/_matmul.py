"""Tile matrix products shared by the tensor-core kernels (flash attention, DLRM interaction,
linear+activation, LoRA).

:func:`dot` is ``tl.dot`` with the accumulation the references assume: fp32 accumulation of exact
products for fp16/bf16 tiles (the tensor cores' native mode), and IEEE fp32 for fp32 tiles (never
TF32, which would round the inputs to 10 mantissa bits where eager fp32 matmuls keep 23).

Triton's CPU interpreter computes bf16 products on the raw 16-bit patterns (``tl.dot`` of two bf16
tiles is garbage there), so under the interpreter bf16 tiles are widened to fp32 first. The widening
is exact and the fp32 product of two bf16 values is exact, so the result is the same fp32-accumulated
product the GPU computes natively; on a GPU the bf16 tiles go to the tensor cores unchanged.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._runtime import interpreting

_WIDEN_BF16 = tl.constexpr(interpreting())


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
