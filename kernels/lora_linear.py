"""Fused LoRA linear: ``x @ weight^T + scale * (x @ lora_a^T) @ lora_b^T``, weight frozen.

x has shape ``(..., K)``, weight ``(N, K)`` (frozen: no gradient), lora_a ``(r, K)`` and lora_b
``(N, r)`` (trainable), r the rank (8, 16, 32 or 64), scale a Python float (LoRA's alpha / r);
fp16 or bf16, accumulated in fp32 (fp32 is left out for the reason given in
kernels/linear_act.py: a Triton fp32 dot is TF32 on the GPU).

**The fusion.** Eager writes three full ``M x N`` intermediates (the base product, the low-rank
product, its scaled copy) and reads them back to add them. Here the only intermediate is
``xa = x @ lora_a^T``, ``M x r`` (cuBLAS; r/K of the base matmul's work). One Triton matmul then
computes, per output tile, the low-rank product ``xa @ lora_b^T`` (a single ``tl.dot`` with inner
dimension r, padded to 16 for the tensor cores: r/K more MMA work, no extra memory pass), scales it
and accumulates the base product ``x @ weight^T`` over K on top of it in the same fp32 accumulator,
and stores the tile once, rounded once.

**Backward.** With ``g`` the output gradient and ``gb = g @ lora_b`` (``M x r``, cuBLAS):
``grad_x = g @ weight + scale * gb @ lora_a`` is the same fused kernel (weight and lora_a passed
transposed, by strides: no copies); ``grad_lora_a = scale * gb^T @ x`` and
``grad_lora_b = scale * g^T @ xa`` are small-output cuBLAS products, with the scale applied
inside the GEMM (``addmm``'s alpha), so each is rounded once. Again nothing of size ``M x N`` or
``M x K`` is written but grad_x itself.

**Numerics against eager.** ``xa`` and ``gb`` are rounded to the input dtype, exactly as eager
rounds its ``x @ lora_a^T`` and its low-rank gradient; both products are exact 16-bit products
accumulated in fp32, as in cuBLAS. Eager additionally rounds the base and low-rank products, the
scaled one and the sum, where this kernel rounds once: its error is at most eager's kind.

**Tiles.** linear_act's fixed configurations (kernels/linear_act.py), chosen by the output's
M and N; BLOCK_R = max(16, r).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _launch, _matmul, _ops, _rows
from kernels._validate import check_finite_scalar, check_same_device, check_same_dtype, check_shape, check_tensor
from kernels.linear_act import DTYPES, block_boundaries, grouped_tile, matmul_config

OP = "lora_linear"
RANKS = (8, 16, 32, 64)

__all__ = ["RANKS", "block_boundaries", "lora_linear"]


@_launch.jit
def _lora_matmul_kernel(
    x_ptr, w_ptr, xa_ptr, b_ptr, out_ptr, M, N, K, R, scale,
    x_inner, x_so, x_si, stride_wn, stride_wk, stride_xam, stride_xar, stride_bn, stride_br,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = x @ w^T + scale * xa @ b^T for x (M, K), w (N, K), xa (M, R), b (N, R)."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # Edge rows and columns wrap onto valid ones (never stored): no M/N masks on the loads.
    rm_in = rm % M
    rn_in = rn % N
    x_ptrs = x_ptr + _rows.row_offset(rm_in, x_inner, x_so, x_si)[:, None] + rk[None, :]
    w_ptrs = w_ptr + rn_in.to(tl.int64)[None, :] * stride_wn + rk[:, None].to(tl.int64) * stride_wk
    # The low-rank term first: one dot of (BLOCK_M x BLOCK_R) by (BLOCK_R x BLOCK_N), rank padded
    # with 0, scaled, and then used as the base product's initial accumulator, so that a single
    # BLOCK_M x BLOCK_N fp32 accumulator lives in registers (two would take 256 registers per
    # thread at 128 x 256 tiles and 8 warps, and spill).
    rr = tl.arange(0, BLOCK_R)
    xa = tl.load(xa_ptr + rm_in.to(tl.int64)[:, None] * stride_xam + rr[None, :] * stride_xar,
                 mask=rr[None, :] < R, other=0.0)
    bt = tl.load(b_ptr + rn_in.to(tl.int64)[None, :] * stride_bn + rr[:, None] * stride_br,
                 mask=rr[:, None] < R, other=0.0)
    acc = _matmul.dot(xa, bt, tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)) * scale
    acc = _matmul.k_loop(acc, x_ptrs, w_ptrs, K, stride_wk, rk, BLOCK_K, EVEN_K)
    out = acc
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    dense = rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + dense, _rows.cast_for_store(out, out_ptr), mask=mask)


def _fused(x, w_t, xa, b_t, scale: float) -> torch.Tensor:
    """``x @ w_t.T + scale * xa @ b_t.T`` as a dense ``(rows of x, w_t.shape[0])`` tensor.

    x: ``(..., K)`` read in place (its rows by ``kernels/_rows.py``); w_t: ``(N, K)`` and b_t:
    ``(N, r)`` of any strides (transposed views included); xa: ``(M, r)`` of any strides.
    """
    n, k = w_t.shape
    m, r = _ops.rows(x), xa.shape[-1]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if out.numel() == 0:  # before row_layout: an empty x may have any strides, which no copy changes
        return out
    xl = _rows.row_layout(x)
    cfg = matmul_config(m, n)
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
    with _rows.launch_guard(x):
        _lora_matmul_kernel[grid](
            xl.tensor, w_t, xa, b_t, out, m, n, k, r, scale,
            *xl.kernel_args(), w_t.stride(0), w_t.stride(1), xa.stride(0), xa.stride(1),
            b_t.stride(0), b_t.stride(1),
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
            BLOCK_R=max(16, triton.next_power_of_2(r)), GROUP_M=cfg.group_m, EVEN_K=k % cfg.block_k == 0,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    return out


def _scaled_mm(a: torch.Tensor, b: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale * a @ b`` rounded once (the GEMM's alpha, not a second elementwise pass)."""
    return torch.addmm(a.new_zeros(()), a, b, beta=0, alpha=scale)


def _low_rank_input(x, lora_a) -> torch.Tensor:
    """``xa = x @ lora_a^T`` as ``(rows of x, r)`` (cuBLAS), what the forward's kernel and the
    backward's grad_lora_b read."""
    return torch.matmul(x, lora_a.t()).reshape(-1, lora_a.shape[0])


def _grads(x, weight, lora_a, lora_b, xa, grad, scale: float, need_x: bool, need_a: bool, need_b: bool):
    """(grad_x, grad_lora_a, grad_lora_b), None for those not asked for (module docstring)."""
    n, k = weight.shape
    g2 = grad.reshape(-1, n)
    gb = g2 @ lora_b  # (M, r)
    grad_x = grad_a = grad_b = None
    if need_x:
        # g @ weight + scale * gb @ lora_a: the forward's kernel on transposed views
        grad_x = _fused(grad, weight.t(), gb, lora_a.t(), scale).reshape(x.shape)
    if need_a:
        grad_a = _scaled_mm(gb.t(), x.reshape(-1, k), scale)
    if need_b:
        grad_b = _scaled_mm(g2.t(), xa, scale)
    return grad_x, grad_a, grad_b


class _LoraLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, lora_a, lora_b, scale: float):
        xa = _low_rank_input(x, lora_a)
        out = _fused(x, weight, xa, lora_b, scale)
        ctx.save_for_backward(x, weight, lora_a, lora_b, xa)
        ctx.scale = scale
        return out.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight, lora_a, lora_b, xa = ctx.saved_tensors
        scale = ctx.scale
        if grad.dtype != x.dtype:
            grad = grad.to(x.dtype)
        need_x, _, need_a, need_b = ctx.needs_input_grad[:4]
        grad_x, grad_a, grad_b = _grads(x, weight, lora_a, lora_b, xa, grad, scale, need_x, need_a, need_b)
        return grad_x, None, grad_a, grad_b, None


@_ops.op("lora_linear", "(Tensor x, Tensor weight, Tensor lora_a, Tensor lora_b, float scale) -> (Tensor, Tensor)")
def lora_linear_op(x, weight, lora_a, lora_b, scale):
    """The custom op (kernels/_ops.py): the output and xa, which the backward reads."""
    xa = _low_rank_input(x, lora_a)
    return _fused(x, weight, xa, lora_b, scale).reshape(*x.shape[:-1], weight.shape[0]), xa


@lora_linear_op.register_fake
def _(x, weight, lora_a, lora_b, scale):
    return x.new_empty((*x.shape[:-1], weight.shape[0])), x.new_empty((_ops.rows(x), lora_a.shape[0]))


@_ops.op(
    "lora_linear_backward",
    "(Tensor x, Tensor weight, Tensor lora_a, Tensor lora_b, Tensor xa, Tensor grad, float scale, bool need_x, "
    "bool need_lora_a, bool need_lora_b) -> Tensor[]",
)
def lora_linear_backward(x, weight, lora_a, lora_b, xa, grad, scale, need_x, need_lora_a, need_lora_b):
    """The backward as an op: [grad_x, grad_lora_a, grad_lora_b], those asked for."""
    grads = _grads(x, weight, lora_a, lora_b, xa, grad, scale, need_x, need_lora_a, need_lora_b)
    return [g for g in grads if g is not None]


@lora_linear_backward.register_fake
def _(x, weight, lora_a, lora_b, xa, grad, scale, need_x, need_lora_a, need_lora_b):
    return ([_ops.empty_like(x)] if need_x else []) + [_ops.empty_like(t) for t, need in
                                                       ((lora_a, need_lora_a), (lora_b, need_lora_b)) if need]


def _setup(ctx, inputs, output):
    x, weight, lora_a, lora_b, scale = inputs
    ctx.save_for_backward(x, weight, lora_a, lora_b, output[1])
    ctx.scale = scale


def _backward(ctx, grad, _dxa):
    x, weight, lora_a, lora_b, xa = ctx.saved_tensors
    need_x, _, need_a, need_b = ctx.needs_input_grad[:4]
    grads = lora_linear_backward(x, weight, lora_a, lora_b, xa, grad.to(x.dtype), ctx.scale, need_x, need_a, need_b)
    grad_x, grad_a, grad_b = _ops.unpack(grads, (need_x, need_a, need_b))
    return grad_x, None, grad_a, grad_b, None


lora_linear_op.register_autograd(_backward, setup_context=_setup)


def _validate(x, weight, lora_a, lora_b, scale) -> float:
    check_tensor(OP, "x", x, dtypes=DTYPES, min_ndim=1)
    check_tensor(OP, "weight", weight, dtypes=DTYPES, ndim=2)
    check_tensor(OP, "lora_a", lora_a, dtypes=DTYPES, ndim=2)
    check_tensor(OP, "lora_b", lora_b, dtypes=DTYPES, ndim=2)
    check_same_device(OP, x=x, weight=weight, lora_a=lora_a, lora_b=lora_b)
    check_same_dtype(OP, x=x, weight=weight, lora_a=lora_a, lora_b=lora_b)
    k = x.shape[-1]
    check_shape(OP, "weight", weight, (weight.shape[0], k), "(out_features, in_features), in_features = x's last dimension")
    if lora_a.shape[0] not in RANKS:
        raise ValueError(f"{OP}: argument 'lora_a' has rank {lora_a.shape[0]} (its first dimension); supported ranks are {RANKS}")
    check_shape(OP, "lora_a", lora_a, (lora_a.shape[0], k), "(rank, in_features)")
    check_shape(OP, "lora_b", lora_b, (weight.shape[0], lora_a.shape[0]), "(out_features, rank)")
    if weight.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{OP}: argument 'weight' is frozen in LoRA and must not require grad")
    return check_finite_scalar(OP, "scale", scale)


def lora_linear(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor,
                scale: float = 1.0) -> torch.Tensor:
    """``x @ weight^T + scale * (x @ lora_a^T) @ lora_b^T`` with the low-rank path fused.

    x: ``(..., K)`` (``ndim >= 1``, any strides); weight: ``(N, K)``, frozen (must not require
    grad); lora_a: ``(r, K)``, lora_b: ``(N, r)``, r in 8, 16, 32, 64; all float16 or all
    bfloat16 on one device; scale a finite float. Returns a new contiguous ``(..., N)`` tensor,
    differentiable in x, lora_a and lora_b.

    Raises TypeError for a non-tensor or an unsupported or mismatched dtype, or a non-numeric
    scale; ValueError for a wrong shape, rank or device, a weight that requires grad, or a
    non-finite scale.
    """
    scale = _validate(x, weight, lora_a, lora_b, scale)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return lora_linear_op(x, weight, lora_a, lora_b, scale)[0]
    if torch.is_grad_enabled() and (x.requires_grad or lora_a.requires_grad or lora_b.requires_grad):
        return _LoraLinear.apply(x, weight, lora_a, lora_b, scale)
    xa = _low_rank_input(x, lora_a)
    return _fused(x, weight, xa, lora_b, scale).reshape(*x.shape[:-1], weight.shape[0])
