"""Two fp32 Triton kernels on the GPU's fast functions, written as a kernel author would: the
test subjects of harness.approximate (tests/test_approximate_math.py).

* :func:`fast_softmax`: softmax of each row with ``tl.exp`` (on a GPU, ``ex2.approx`` of x·log2 e),
  one row per program, the row in one block; its backward is ``y * (dy - sum(y * dy))`` on the
  saved y, so the gradient carries the fast exp's error too.
* :func:`fast_silu_mul`: ``a * sigmoid(a) * b`` with ``tl.sigmoid`` (``1 / (1 + exp(-a))`` on the
  fast exp).

``ulps_off`` plants an error: the results of the bulk of each output (exp arguments and
activations within 2 of 0, where the functions' documented error is at most 4 ulps) are moved by
that many fp32 ulps, away from the tails where the approximations legitimately err.
``grad_ulps_off`` moves softmax's gradient there the same way.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, ULPS_OFF: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    shifted = x - tl.max(x, axis=0)
    e = tl.exp(shifted)
    y = e / tl.sum(e, axis=0)
    if ULPS_OFF != 0:
        y = tl.where(shifted > -2.0, y * (1.0 + ULPS_OFF * 1.1920928955078125e-07), y)
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


@triton.jit
def _softmax_backward_kernel(y_ptr, dy_ptr, dx_ptr, n_cols, ULPS_OFF: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * n_cols + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * n_cols + cols, mask=mask, other=0.0)
    dx = y * (dy - tl.sum(y * dy, axis=0))
    if ULPS_OFF != 0:
        # where the row's larger probabilities sit (their exp arguments within 2 of the max)
        dx = tl.where(y > tl.max(y, axis=0) * 0.135, dx * (1.0 + ULPS_OFF * 1.1920928955078125e-07), dx)
    tl.store(dx_ptr + row * n_cols + cols, dx, mask=mask)


@triton.jit
def _silu_mul_kernel(a_ptr, b_ptr, out_ptr, n, ULPS_OFF: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    out = a * tl.sigmoid(a) * b
    if ULPS_OFF != 0:
        out = tl.where(tl.abs(a) < 2.0, out * (1.0 + ULPS_OFF * 1.1920928955078125e-07), out)
    tl.store(out_ptr + offs, out, mask=mask)


class _FastSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, ulps_off: int, grad_ulps_off: int) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        _softmax_kernel[(x.numel() // n_cols,)](x, y, n_cols, ULPS_OFF=ulps_off, BLOCK=triton.next_power_of_2(n_cols))
        ctx.save_for_backward(y)
        ctx.grad_ulps_off = grad_ulps_off
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        (y,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(y)
        n_cols = y.shape[-1]
        _softmax_backward_kernel[(y.numel() // n_cols,)](y, dy, dx, n_cols, ULPS_OFF=ctx.grad_ulps_off,
                                                          BLOCK=triton.next_power_of_2(n_cols))
        return dx, None, None


def fast_softmax(x: torch.Tensor, ulps_off: int = 0, grad_ulps_off: int = 0) -> torch.Tensor:
    return _FastSoftmax.apply(x, ulps_off, grad_ulps_off)


def fast_silu_mul(a: torch.Tensor, b: torch.Tensor, ulps_off: int = 0) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    _silu_mul_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), ULPS_OFF=ulps_off, BLOCK=1024)
    return out
