"""Reference for ``kernels.flash_attention.flash_attention``: ``softmax(q k^T * scale) v`` and the
log-sum-exp of each row of scores.

The arithmetic is fp32 for fp16/bf16 inputs (fp64 for fp64 inputs, which is how the harness builds
its oracle), with the three roundings to the input dtype that every flash-attention kernel makes
and that no choice of block size avoids. They are stated here so that the harness's error budget,
which is calibrated on this function run in the kernel's dtype, contains them:

1. **P before the PV product.** The forward rounds the unnormalised probabilities
   ``p = exp(s - max)`` to the input dtype before ``p @ v`` (tensor cores multiply fp16/bf16 tiles)
   and sums the denominator ``l = sum(p)`` from the unrounded values; the backward recomputes the
   normalised ``P = p / l`` from the log-sum-exp and rounds that for ``dV = P^T dO``. (Which of the
   two is rounded matters: the row's largest p is exactly 1, its P is not.)
2. **dS before the dQ and dK products.** The score gradient ``dS = P * (dP - D)`` is rounded to
   the input dtype before ``dQ = dS K`` and ``dK = dS^T Q``.
3. **D from the stored output.** The backward's row term ``D = rowsum(dO * O) - dlse`` uses the
   output as stored, rounded to the input dtype (FlashAttention-2's preprocessing step), not the
   unrounded fp32 output. In rows where attention is peaked the true ``dQ`` is tiny and this
   rounding is most of a flash kernel's error there; without it the budget would demand more than
   a FlashAttention-2 backward can give. (This project's kernel takes D so too;
   ``tests/unit/test_attention_weights.py`` checks the budget against the scheme emulated in torch.)

Without these, eager in fp16 makes only the final rounding of the output, and a flash kernel's
legitimate error (each P element off by half an ulp, summed over the keys) would exceed that
envelope wherever the output cancels. With them, eager and kernel make the same kinds of rounding
at the same points, each with its own rounding pattern, and the budget compares like with like.
In fp64 (the oracle) every rounding is the identity: the oracle is exact attention with exact
autograd gradients.
"""

from __future__ import annotations

import torch


class _RoundGradient(torch.autograd.Function):
    """``x`` unchanged; the gradient flowing back through it is rounded to ``dtype``."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return _round(grad, ctx.dtype), None


class _Attend(torch.autograd.Function):
    """``O = round(p) @ v / l`` for unnormalised probabilities ``p`` and their row sums ``l``.

    The backward is exact except for the roundings a flash backward makes, with ``P = p / l``:
    ``dv = round(P)^T dO`` (the backward recomputes P normalised, from the log-sum-exp, and rounds
    it for the tensor cores: rounding 1 of the module docstring applies to P as the kernel holds
    it in each pass), ``dp = dO v^T / l``, and ``dl = -rowsum(dO * round(O)) / l`` (rounding 3).
    """

    @staticmethod
    def forward(ctx, p, l, v, dtype):
        out = (_round(p, dtype) @ v) / l
        ctx.save_for_backward(p, l, v, out)
        ctx.dtype = dtype
        return out

    @staticmethod
    def backward(ctx, grad):
        p, l, v, out = ctx.saved_tensors
        grad_v = _round(p / l, ctx.dtype).transpose(-2, -1) @ grad
        grad_p = (grad @ v.transpose(-2, -1)) / l
        grad_l = -(grad * _round(out, ctx.dtype)).sum(dim=-1, keepdim=True) / l
        return grad_p, grad_l, grad_v, None


def _group(t: torch.Tensor, heads: int) -> torch.Tensor:
    """k or v of ``kv_heads`` heads spread over q's ``heads`` (grouped-query attention: q head h
    reads head h // (heads // kv_heads)); ``t`` itself when the counts agree. Autograd sums the
    gradient over each group, in ``t``'s dtype: pass ``t`` already in the compute dtype."""
    kv_heads = t.shape[-3]
    return t if kv_heads == heads else t.repeat_interleave(heads // kv_heads, dim=-3)


def _group_sum(t: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """A per-q-head tensor (..., heads, seq, d) summed over each group of q heads: (..., kv_heads, seq, d)."""
    heads = t.shape[-3]
    if kv_heads == heads:
        return t
    return t.unflatten(-3, (kv_heads, heads // kv_heads)).sum(dim=-3)


def _round(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` rounded to ``dtype`` and returned in its own dtype (the identity when dtype is x's)."""
    return x.to(dtype).to(x.dtype)


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output in q's dtype, log-sum-exp of the scaled scores in fp32, or fp64 for fp64 inputs).
    k and v may have fewer heads than q (grouped-query or multi-query attention), a divisor of
    q's: each is repeated over its group of q heads in the compute dtype, so that the gradients of
    k and v sum the group's contributions there and are rounded once."""
    dtype = q.dtype
    compute = torch.promote_types(dtype, torch.float32)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    heads = q.shape[-3]
    k, v = _group(k.to(compute), heads), _group(v.to(compute), heads)
    s = (q.to(compute) @ k.transpose(-2, -1)) * scale
    s = _RoundGradient.apply(s, dtype)
    if causal:
        n = s.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    m = s.amax(dim=-1, keepdim=True).detach()  # a shift for stability: its gradient cancels exactly
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    out = _Attend.apply(p, l, v, dtype)
    lse = (m + torch.log(l)).squeeze(-1)
    return out.to(dtype), lse


# The error model of a 16-bit dot product on tensor cores. They add the products in blocks, into an
# fp32 accumulator, truncating (rounding toward zero) instead of rounding to nearest (Fasi, Higham,
# Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330,
# 2021, measured the V100, T4 and A100; Hopper is not covered there). Modelled as one rounding
# toward zero per block of this many products, a score of d products errs by up to
# ceil(d / block) ulps of sum |q_d k_d| (the block-FMA bound of Blanchard, Higham, Lopez, Mary and
# Pranesh, SIAM J. Sci. Comput. 42(3), 2020, with truncation's whole ulp), where eager's fp32
# matmul rounds to nearest and errs far less. The block of 8 is calibrated, not documented: an
# H200 nightly case (fp16, head_dim 128, q = k, so every product is positive and no truncation
# offsets another) had the kernel's log-sum-exp, an fp32 output, 5.8e-6 off at 11.74, 2.06x an
# envelope of one ulp of its terms; the model gives 6.7e-6 there with blocks of 8 and 2.9e-6 with
# blocks of 16, so the H200 sits between (tests/unit/test_term_hooks.py replays the case). The
# envelope there grows 8.5-fold: the kernel's error may be up to about 7x the H200's and pass.
_TENSOR_CORE_BLOCK = 8


def term_magnitudes(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sums of |terms| behind each output element (``harness.numerics``): ``softmax(s) @ |v|``
    for the output, ``|max s| + |log l| + blocks * sum_j P_j sum_d |q_d k_jd| * scale`` for the
    log-sum-exp. The last term: each score is a dot product of its own, which cancels when q or k
    is small against the other (the CPU run found a one-key causal row, lse = s = 3.9e-4 from terms
    of ~1e-3, where the kernel's other summation order was 2.08x eager's envelope), and which a
    kernel sums on tensor cores, whose error is up to ``blocks`` ulps of its terms, not one
    (``_TENSOR_CORE_BLOCK``). Both outputs cancel (the output
    where v's signs mix, the log-sum-exp where log l offsets the maximum), and a flash kernel's
    probabilities are rounded against a running maximum, not the final one: for a near-uniform
    row they then round to 1 or to 1 - 2^-8 differently from eager's (an H100 nightly case, bf16,
    seq 127, output 0.0023 from terms of ~0.8: kernel 0.002441, eager 0.002274, oracle 0.002288;
    a 64-key-block simulation of the kernel's roundings gives 0.002441 exactly)."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    k, v = _group(k, q.shape[-3]), _group(v, q.shape[-3])
    s = (q @ k.transpose(-2, -1)) * scale
    # Each score is itself a dot product that may cancel: its error is up to ``blocks`` ulps of
    # sum |q_d k_d| on tensor cores (_TENSOR_CORE_BLOCK).
    blocks = -(-q.shape[-1] // _TENSOR_CORE_BLOCK)
    s_terms = (q.abs() @ k.abs().transpose(-2, -1)) * (abs(scale) * blocks)
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    # d lse / d s_j = P_j: a score's error reaches the log-sum-exp weighted by its probability.
    score_terms = (p * s_terms).sum(dim=-1, keepdim=True) / l
    return (p @ v.abs()) / l, (m.abs() + torch.log(l).abs() + score_terms).squeeze(-1)


def gradient_rounded_terms(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None,
    grad_outputs: list[torch.Tensor] = (),
) -> dict[str, torch.Tensor]:
    """The root-sum-square of the terms each gradient element sums after a rounding to the input
    dtype (``harness.numerics``), from roundings 1 and 2 of the module docstring:

    * dS before ``dQ = scale * dS K`` and ``dK = scale * dS^T Q``: terms ``dS_ij k_jd``, ``dS_ij q_id``;
    * P before PV, which moves each row's D = rowsum(dO * O) by ``sum_j dP_ij * (P_ij's rounding)``,
      and D moves dQ_i along ``(P K)_i`` and dK_j by ``P_ij q_i``: terms ``P_ij dP_ij`` per row;
    * P before ``dV = P^T dO``: terms ``P_ij dO_id``.

    Eager in the input dtype makes the same roundings (and D from the rounded output besides), so
    these are the sizes of its errors too, wherever its own roundings did not cancel. With
    grouped k and v, dK and dV sum the terms of every q head of the group (root-sum-square over
    the group)."""
    if scale is None:
        scale = q.shape[-1] ** -0.5
    kv_heads = k.shape[-3]
    k, v = _group(k, q.shape[-3]), _group(v, q.shape[-3])
    grad_out = grad_outputs[0]
    grad_lse = grad_outputs[1] if len(grad_outputs) > 1 else None
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    dp = grad_out @ v.transpose(-2, -1)
    d = (p * dp).sum(dim=-1, keepdim=True)
    if grad_lse is not None:
        d = d - grad_lse.unsqueeze(-1)
    ds = p * (dp - d)
    rss_d = ((p * dp) ** 2).sum(dim=-1, keepdim=True).sqrt()  # D's rounding noise per row
    rss_q = (scale**2 * ((ds**2) @ (k**2) + (rss_d * (p @ k)) ** 2)).sqrt()
    rss_k = (scale**2 * ((ds**2).transpose(-2, -1) @ (q**2) + (p**2).transpose(-2, -1) @ ((rss_d * q) ** 2))).sqrt()
    rss_v = ((p**2).transpose(-2, -1) @ (grad_out**2)).sqrt()
    return {"q": rss_q, "k": _group_sum(rss_k**2, kv_heads).sqrt(), "v": _group_sum(rss_v**2, kv_heads).sqrt()}
