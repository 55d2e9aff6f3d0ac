"""Flash attention, forward and backward: the Triton kernel against eager attention in fp32.

Both outputs are compared: the attention output (q's dtype) and the log-sum-exp (fp32). The
log-sum-exp is part of the API (split-key and ring attention merge partial results through it, and
its gradient flows into q and k), so it is held to the same budget as the output, and the backward
check feeds a gradient into it too.

The error budget is the harness's standard one, with multiple 2: the reference
(``references/flash_attention.py``) performs the three roundings to the input dtype that a
FlashAttention-2 kernel performs (P before the PV product, dS before the dQ/dK products, D from
the stored output), so eager's calibrated error already contains the kind of error a correct flash
kernel makes; what remains between them is a different rounding pattern at the same points, which
the envelope's row maximum and its calibration samples absorb.

Logits are generated up to a few hundred in magnitude (q and k of unit scale, scale up to 4), which
covers attention from uniform to one-hot rows. Logits of 1e4 and more (q and k both of scale 1e2)
are outside what any recomputing flash backward can match eager on: the backward recomputes each
score with tiles of another shape than the forward's, whose fp32 accumulation may differ from it by
an ulp (always under the interpreter; on a GPU when the two tile shapes sum in different orders),
and an ulp of a score of 3e5 is 0.03, which moves the row's dominant probability by 2%, far beyond
half an ulp of fp16. Eager uses the forward's probabilities and has no such error. Measured under
the interpreter: grad v 1000x over eager's envelope at scores of 1e5; within budget at scores < 1e3.

Grouped-query attention: k and v have ``kv_heads`` heads, q ``kv_heads * group`` (one axis of the
product of two dims, ``TensorArg.dims``): ``group`` 1 is multi-head attention, ``kv_heads`` 1
multi-query attention. q head h reads k/v head h // group, as the kernel does.
"""

import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel

from harness import BadInput, BenchShape, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.flash_attention as kernel
import references.flash_attention as reference
from specs import _unreached

_Q = ("batch", ("kv_heads", "group"), "seq", "head_dim")
_KV = ("batch", "kv_heads", "seq", "head_dim")


def _term_magnitudes(call):
    return reference.term_magnitudes(**call.kwargs)


def _gradient_rounded_terms(call, grad_outputs):
    return reference.gradient_rounded_terms(**call.kwargs, grad_outputs=grad_outputs)


def _q_tokens(dims):
    return dims["batch"] * dims["kv_heads"] * dims["group"] * dims["seq"]


def _kv_tokens(dims):
    return dims["batch"] * dims["kv_heads"] * dims["seq"]


def _forward_flops(call):
    """Two matmuls of seq x seq x head_dim per q head (QK^T and PV), halved when causal: the
    convention of FlashAttention's and the peers' TFLOP/s figures."""
    dims = call.dims
    flops = 4.0 * _q_tokens(dims) * dims["seq"] * dims["head_dim"]
    return flops / 2 if call["causal"] else flops


def _forward_bytes(call):
    """Read q, k, v; write the output and the fp32 log-sum-exp (k and v have kv_heads heads)."""
    dims = call.dims
    row = dims["head_dim"] * call.dtype.itemsize
    return _q_tokens(dims) * (2 * row + 4) + _kv_tokens(dims) * 2 * row


def _backward_bytes(call):
    """Read q, k, v, out, grad_out, lse (and grad_lse); write grad_q, grad_k, grad_v."""
    dims = call.dims
    row = dims["head_dim"] * call.dtype.itemsize
    return _q_tokens(dims) * (4 * row + 8) + _kv_tokens(dims) * 4 * row


def _shape(seq, head_dim, causal, dtype="float16", quick=False, heads=None, kv_heads=None, batch=None):
    """A benchmark point of 64 K query rows (batch x heads x seq; 16 heads up to seq 4096) unless
    ``batch`` is given: 1024 forward blocks of 64 queries, about eight per SM on an H100.
    ``kv_heads`` (default: ``heads``) makes it grouped-query attention."""
    heads = heads or min(16, 65536 // seq)
    kv_heads = kv_heads or heads
    batch = batch or max(1, 65536 // (heads * seq))
    dims = {"batch": batch, "kv_heads": kv_heads, "group": heads // kv_heads, "seq": seq, "head_dim": head_dim}
    return BenchShape(dims, dtype, {"causal": causal, "scale": None}, quick=quick)


def _sdpa(q, k, v, causal, scale):
    """The bar for the benchmarks: torch's scaled_dot_product_attention with no backend pinned,
    what a user gets (cuDNN's kernels on Hopper with torch 2.11). The output only: SDPA does not
    return the log-sum-exp. Grouped k and v through its ``enable_gqa``."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


def _sdpa_flash(q, k, v, causal, scale):
    """An extra column: SDPA pinned to its FlashAttention backend."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                              enable_gqa=k.shape[1] != q.shape[1])


def _grouped_heads(kw):
    """q of 3 heads with k and v of 2: 2 does not divide 3."""
    q = kw["q"]
    b, _, seq, d = q.shape
    return {**kw, "q": q.new_zeros(b, 3, seq, d), "k": q.new_zeros(b, 2, seq, d), "v": q.new_zeros(b, 2, seq, d)}


def _more_kv_heads(kw):
    """k (and v) of one head more than q has: more k/v heads than q heads."""
    q = kw["q"]
    b, heads, seq, d = q.shape
    kv = q.new_zeros(b, heads + 1, seq, d)
    return {**kw, "q": q, "k": kv, "v": kv}


def _v_heads(kw):
    """v of twice k's heads."""
    return {**kw, "v": torch.cat([kw["v"], kw["v"]], dim=1)}


SPEC = KernelSpec(
    name="flash_attention",
    description="softmax(q k^T * scale) v and its log-sum-exp, causal or not (FlashAttention-2 forward and backward)",
    reference=reference.flash_attention,
    implementations={"triton": kernel.flash_attention},
    tensors=(
        # Scores stay within a few hundred (normal q and k, scale <= 4: rows from uniform to
        # one-hot); see the module docstring for why logits of 1e4 are outside the contract.
        TensorArg("q", dims=_Q, grad=True, values=("normal", "small")),
        TensorArg("k", dims=_KV, grad=True, values=("normal", "small")),
        TensorArg("v", dims=_KV, grad=True, values=("normal", "large", "mixed_scales")),
    ),
    dims={
        "batch": Dim(cpu_max=2, gpu_max=3),
        # q has kv_heads * group heads: group 1 is multi-head attention, kv_heads 1 multi-query.
        "kv_heads": Dim(cpu_max=2, gpu_max=5),
        "group": Dim(cpu_max=2, gpu_max=4),
        # CPU: up to past two 16-key blocks and one 32-query block (33); GPU: past several blocks of
        # every backward step (most GPU cases take the small-grid 32 x 32 step: _GPU_BWD).
        "seq": Dim(cpu_max=33, gpu_max=700, boundaries=kernel.block_boundaries),
        "head_dim": Dim(cpu_max=32, gpu_max=128, choices=kernel.HEAD_DIMS),
    },
    scalars={
        "causal": st.booleans(),
        # None is 1/sqrt(head_dim); larger scales make attention peaked (the online softmax's
        # running maximum changes between blocks), smaller ones make it nearly uniform.
        "scale": st.none() | st.sampled_from((0.05, 0.125, 0.5, 2.0)) | st.floats(0.015625, 4.0, width=32),
    },
    unreached_on_cpu=_unreached.MATMUL,
    dtypes=("float16", "bfloat16"),
    numerics=Numerics(
        error_multiple=2.0,
        term_magnitudes=_term_magnitudes,
        # dQ = sum_j dS_ij k_j * scale sums terms that cancel (sum_j dS_ij = 0 exactly: the softmax
        # gradient), after every flash kernel rounds dS to the input dtype (rounding 2 of the
        # reference). The error is then eps * sum_j |dS_ij k_j|, far above an ulp of dQ, and falls on
        # other elements in eager and in the kernel; the envelope sees only dQ's row, not the terms
        # (docs/design-notes.md, "Known limits"). Found by the CI profile: fp16, causal, v of mixed
        # row scales, dQ 3.66x eager's envelope at one element; measured in units of
        # eps * sum_j |dS_ij k_jd| * scale, the kernel's worst error there is 3.32 and eager's 3.32 too.
        gradient_error_multiple=4.0,
        # The gradients' rounded terms (dS before dS K and dS^T Q, P before PV and P^T dO): where eager's
        # own roundings cancel along a whole row, the envelope keeps a unit roundoff of their
        # root-sum-square. The H100 nightly found bf16 dQ at 4.59x an envelope of one eps (head_dim 16,
        # plain normal inputs: eager within an eps on all 16 elements of the row).
        gradient_rounded_terms=_gradient_rounded_terms,
    ),
    bad_scalars={"scale": [0.0, -0.5, float("nan"), float("inf"), "0.1"], "causal": [1, "yes", None]},
    bad_inputs=(
        BadInput("head_dim 24 (not 16, 32, 64 or 128)", "q",
                 lambda kw: {**kw, **{n: kw[n].new_zeros(kw[n].shape[:-1] + (24,)) for n in ("q", "k", "v")}}),
        BadInput("a 3-d q (no batch dimension)", "q", lambda kw: {**kw, "q": kw["q"].flatten(0, -3)}),
        BadInput("q of 3 heads, k and v of 2 (not a divisor)", "k", _grouped_heads),
        BadInput("k and v of more heads than q", "k", _more_kv_heads),
        BadInput("v of twice k's heads", "v", _v_heads),
    ),
    perf=PerfModel(
        bytes_moved=_forward_bytes,
        backward_bytes=_backward_bytes,
        flops=_forward_flops,
        # FlashAttention's convention: the backward is 2.5 forwards (five seq x seq matmuls to two).
        backward_flops=lambda call: 2.5 * _forward_flops(call),
        peers={"sdpa": _sdpa, "sdpa_flash": _sdpa_flash},
        shapes=(
            _shape(1024, 64, False, quick=True),
            _shape(1024, 64, True),
            _shape(1024, 128, False),
            _shape(1024, 128, True),
            _shape(4096, 64, False),
            _shape(4096, 64, True),
            _shape(4096, 128, False),
            _shape(4096, 128, True),
            # seq 16k: one sequence of 2 heads, so that eager's and the fp64 re-check's 16k x 16k
            # score tensors (1 GiB a head in fp32, 2 GiB in fp64) fit: 512 forward blocks of 64 queries
            _shape(16384, 64, True, heads=2, batch=1),
            _shape(16384, 128, False, heads=2, batch=1),
            _shape(16384, 128, True, heads=2, batch=1),
            # grouped-query attention, Llama's 32 q heads over 8 k/v heads
            _shape(4096, 128, True, dtype="bfloat16", heads=32, kv_heads=8),
        ),
    ),
)
