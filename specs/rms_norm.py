"""RMSNorm over the last dimension: the Triton kernel against ``F.rms_norm``."""

from hypothesis import strategies as st

from harness import BadInput, Batch, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.rms_norm as kernel
import references.rms_norm as reference
from specs import _norm, _peers, _unreached
# Which scale a call passes: a weight used as is, a weight stored as an offset from one (Gemma's
# ``1 + weight``), or none.
SCALE = ("weight", "offset_weight", "none")


def _arguments(weight, weight_offset, scale):
    """(weight, weight_offset) of a call: the offset is the drawn one only for ``offset_weight``."""
    if scale == "none":
        return None, 0.0
    return weight, (weight_offset if scale == "offset_weight" else 0.0)


def _triton(x, weight, eps, weight_offset, scale):
    kernel.check_arguments(x, weight, eps, weight_offset)  # every generated argument (specs/_norm.py)
    w, offset = _arguments(weight, weight_offset, scale)
    return kernel.rms_norm(x, w, eps, offset)


def _reference(x, weight, eps, weight_offset, scale):
    w, offset = _arguments(weight, weight_offset, scale)
    return reference.rms_norm(x, w, eps, offset)


def _gradient_terms(x, weight, eps, weight_offset, scale, grad_outputs):
    w, offset = _arguments(weight, weight_offset, scale)
    return reference.gradient_term_magnitudes(x, w, eps, offset, grad_outputs[0])


SPEC = KernelSpec(
    name="rms_norm",
    description="RMSNorm over the last dimension, weight optional (or 1 + weight), fp32 statistics",
    reference=_reference,
    implementations={"triton": _triton},
    tensors=(
        # zero_rows: mean(x^2) = 0, the output must be exactly 0 (rstd = 1/sqrt(eps)).
        TensorArg("x", dims=("*batch", "rows", "cols"), grad=True, values=_norm.INPUT_VALUES + ("zero_rows",)),
        TensorArg("weight", dims=("cols",), grad=True, values=_norm.WEIGHT_VALUES),
    ),
    dims={
        "*batch": Batch(max_rank=1, cpu_max=2, gpu_max=3),
        "rows": Dim(cpu_max=6, gpu_max=512),
        # Past two interpreter blocks (CPU); past the split limit of forward and backward (GPU).
        "cols": Dim(cpu_max=140, gpu_max=20500, boundaries=kernel.block_boundaries),
    },
    scalars={
        "eps": _norm.EPS,
        "weight_offset": st.sampled_from((1.0, 0.5, -1.0)),
        "scale": st.sampled_from(SCALE),
    },
    dtypes=("float32", "float16", "bfloat16", "float64"),
    tiling_cases=_norm.tiling_cases(scale="weight"),
    unreached_on_cpu=_unreached.NORMS,
    numerics=Numerics(
        error_multiple=2.0,
        # The output is a product (no terms to cancel); the gradients are cancelling sums, formed in
        # fp32 from the exact inputs.
        gradient_term_magnitudes=_gradient_terms,
        term_precision="float32",
    ),
    bad_scalars={"eps": _norm.BAD_EPS, "weight_offset": [float("nan"), float("inf")]},
    bad_inputs=(BadInput("a 0-d tensor (no dimension to normalise over)", "x", lambda kw: {**kw, "x": kw["x"][(0,) * kw["x"].ndim]}),),
    perf=PerfModel(
        peers=_peers.RMS_NORM,
        # Forward: read x, write y (the weight: one row). Backward: read x and dy, write dx (the
        # saved 1/rms is a few bytes per row) and dweight.
        bytes_moved=lambda dims, dtype: _norm.row_bytes(dims, dtype, passes=2, vectors=1),
        backward_bytes=lambda dims, dtype: _norm.row_bytes(dims, dtype, passes=3, vectors=2),
        flops=lambda dims, dtype: 4.0 * _norm.elements(dims),
        backward_flops=lambda dims, dtype: 9.0 * _norm.elements(dims),
        shapes=_norm.bench_shapes(
            {"eps": 1e-6, "weight_offset": 1.0, "scale": "weight"},
            peers=((8192, 4096, "bfloat16", True), (16384, 1024, "float16", True)),
        ),
    ),
)
