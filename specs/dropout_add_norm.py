"""Bias-dropout-residual-add-norm: the Triton kernel against the eager composite
``norm(F.dropout(x + bias, p) + residual)``, with the kernel's own keep-mask replayed into the
reference (``random=RandomSpec``; see ``harness.random_checks``)."""

import torch
from hypothesis import strategies as st

from harness import BadInput, Batch, Dim, KernelSpec, Numerics, PerfModel, TensorArg, TilingCase
from harness.spec import RandomSpec

import kernels.dropout_add_norm as kernel
import references.dropout_add_norm as reference
from specs import _norm, _unreached

# Drop probabilities: the edges (p = 0 is the deterministic op, p = 1 drops everything) and common
# values, then any p up to 0.95 (beyond, 1/(1-p) overflows fp16 sums of ordinary values).
P = st.sampled_from((0.0, 0.1, 0.5, 0.9, 1.0)) | st.floats(0.0, 0.95)
# Seeds: small ones, the 32-bit boundaries of Philox's key words, the largest accepted, any.
SEED = st.sampled_from((0, 1, 2**31 - 1, 2**32 - 1, 2**32, 2**63 - 1)) | st.integers(0, 2**63 - 1)


def _norms(drawn):
    """LayerNorm or RMSNorm; RMSNorm only where the call passes no norm_bias (it has none)."""
    return st.just("layer") if "norm_bias" in drawn.present else st.sampled_from(kernel.NORMS)


def _terms(call):
    return reference.term_magnitudes(**call.kwargs, mask=call.mask)


def _gradient_terms(call, grad_outputs):
    return reference.gradient_term_magnitudes(**call.kwargs, grad_outputs=grad_outputs, mask=call.mask)


def _other_dtype(kw):
    """A valid call whose residual has another float dtype than x."""
    other = torch.float16 if kw["x"].dtype == torch.float32 else torch.float32
    return {**kw, "residual": kw["residual"].to(other)}


# ---- performance model ---------------------------------------------------------------------------
# Forward (inference, prenorm and mask not returned): read x and residual, write y; bias, weight
# and norm_bias are one row each. Backward: read dy and what the forward normalised, write
# grad_residual (= ds) and grad_x (= ds * mask * scale); the mask is regenerated from the seed,
# never stored. What the forward normalised is either stored by a training forward (one more write,
# then one read: 2 passes) or recomputed from x and residual (2 reads): 5 passes either way, so a
# forward + backward moves at least 3 + 5 = 8 passes. The column gradients are 3 rows.


def _forward_bytes(call):
    return _norm.row_bytes(call, passes=3, vectors=_norm.vectors(call, "bias", "weight", "norm_bias"))


def _backward_bytes(call):
    return _norm.row_bytes(call, passes=5, vectors=_norm.vectors(call, "weight") + _norm.vectors(call, "bias", "weight", "norm_bias"))


_BENCH_SCALARS = {"p": 0.1, "seed": 1234, "norm": "layer", "eps": 1e-5, "prenorm": False, "return_mask": False}

SPEC = KernelSpec(
    name="dropout_add_norm",
    description="norm(dropout(x + bias, p) + residual), LayerNorm or RMSNorm; prenorm sum and keep-mask optional",
    # Without ``mask`` the reference draws its own with torch's dropout (benchmarks time that); the
    # harness passes the kernel's mask as ``mask`` to compare values.
    reference=reference.dropout_add_norm,
    numerics=Numerics(
        term_magnitudes=_terms,  # given the kernel's mask when the harness replays it
        gradient_term_magnitudes=_gradient_terms,
        error_multiple=2.0,
    ),
    implementations={"triton": kernel.dropout_add_norm},
    tensors=(
        TensorArg("x", dims=("*batch", "rows", "cols"), grad=True, values=_norm.INPUT_VALUES + ("zero_rows",)),
        TensorArg("residual", dims=("*batch", "rows", "cols"), grad=True,
                  values=("normal", "large", "small", "zero_rows", "constant_rows")),
        TensorArg("bias", dims=("cols",), grad=True, values=("normal", "small"), optional=True),
        TensorArg("weight", dims=("cols",), grad=True, values=_norm.WEIGHT_VALUES, optional=True),
        TensorArg("norm_bias", dims=("cols",), grad=True, values=("normal",), optional=True),
    ),
    dims={
        # Up to two batch dims: (batch, seq, hidden) activations and more.
        "*batch": Batch(max_rank=2, cpu_max=2, gpu_max=3),
        # CPU: up to 8 rows in all (2 backward row tiles of 4: a row group carrying a partial sum;
        # several row groups are exercised by the layer_norm and rms_norm specs).
        "rows": Dim(cpu_max=2, gpu_max=256),
        # CPU: across the 64-column block boundary into a second block (the mask's stream at a
        # block offset; rows of 3 blocks, 127-129, are left to the layer_norm and rms_norm specs,
        # same kernels, to keep this spec within its CPU time: each dropout launch draws Philox,
        # ~25 ms per block under the interpreter). GPU: past the split limit of forward and backward.
        "cols": Dim(cpu_max=70, gpu_max=20500, boundaries=kernel.block_boundaries),
    },
    scalars={
        "p": P,
        "seed": SEED,
        "norm": _norms,
        "eps": _norm.EPS,
        "prenorm": st.booleans(),
        "return_mask": st.booleans(),
    },
    random=RandomSpec(seed="seed", p="p", mask_scalars={"return_mask": True}, reference_mask="mask"),
    dtypes=("float32", "float16", "bfloat16", "float64"),
    # The same kernels as layer_norm's and rms_norm's (their tiling cases cover the row groups);
    # here the dropout mask's stream in a later column block.
    tiling_cases=(
        TilingCase("rows of two 64-column blocks, the second partial, with dropout (the mask drawn at the "
                   "block's column offset, forward and backward)", dims={"*batch": [2], "rows": 2, "cols": 70},
                   scalars={"p": 0.5}),
    ),
    unreached_on_cpu=_unreached.NORMS,
    bad_scalars={
        "p": [-0.1, 1.5, float("nan")],
        "seed": [-1, 2**63, 1.5],
        "norm": ["batch", "RMS"],
        "eps": _norm.BAD_EPS,
    },
    bad_inputs=(
        BadInput("a 0-d x (no dimension to normalise over)", "x", lambda kw: {**kw, "x": kw["x"][(0,) * kw["x"].ndim]}),
        BadInput("residual in another dtype than x", "residual", _other_dtype),
    ),
    perf=PerfModel(
        bytes_moved=_forward_bytes,
        backward_bytes=_backward_bytes,
        flops=lambda call: 12.0 * _norm.elements(call),
        backward_flops=lambda call: 18.0 * _norm.elements(call),
        # The case, activations [64, 128, 1024] fp32 at p = 0.1 with LayerNorm: benchmark
        # cases have no batch dims, and for this row-wise op on contiguous tensors [64, 128, 1024]
        # is [8192, 1024] (same memory, same rows; eager's and compile's kernels see the same).
        shapes=_norm.bench_shapes(
            _BENCH_SCALARS,
            peers=((64 * 128, 1024, "float32", True), (8192, 4096, "bfloat16", True), (16384, 1024, "float16", True)),
        ),
    ),
)
