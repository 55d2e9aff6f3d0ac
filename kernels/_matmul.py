"""Tile matrix products shared by the tensor-core kernels (flash attention, DLRM interaction).

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
