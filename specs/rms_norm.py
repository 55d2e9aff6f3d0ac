"""RMSNorm over the last dimension: the Triton kernel against ``F.rms_norm``."""

from hypothesis import strategies as st

from harness import BadInput, Batch, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.rms_norm as kernel
import references.rms_norm as reference
from specs import _norm, _peers, _unreached

# The offset of the ``(weight_offset + weight)`` form (Gemma's ``1 + weight``), drawn where the call
# passes a weight; without one the kernel takes only 0.0 (nothing to offset).
OFFSETS = st.sampled_from((0.0, 1.0, 0.5, -1.0))


def _offset(drawn):
    return OFFSETS if "weight" in drawn.present else st.just(0.0)


def _gradient_terms(call, grad_outputs):
    return reference.gradient_term_magnitudes(**call.kwargs, grad_output=grad_outputs[0])


SPEC = KernelSpec(
    name="rms_norm",
    description="RMSNorm over the last dimension, weight optional (or 1 + weight), fp32 statistics",
    reference=reference.rms_norm,
    implementations={"triton": kernel.rms_norm},
    tensors=(
        # zero_rows: mean(x^2) = 0, the output must be exactly 0 (rstd = 1/sqrt(eps)).
        TensorArg("x", dims=("*batch", "rows", "cols"), grad=True, values=_norm.INPUT_VALUES + ("zero_rows",)),
        TensorArg("weight", dims=("cols",), grad=True, values=_norm.WEIGHT_VALUES, optional=True),
    ),
    dims={
        "*batch": Batch(max_rank=1, cpu_max=2, gpu_max=3),
        "rows": Dim(cpu_max=6, gpu_max=512),
        # Past two interpreter blocks (CPU); past the split limit of forward and backward (GPU).
        "cols": Dim(cpu_max=140, gpu_max=20500, boundaries=kernel.block_boundaries),
    },
    scalars={
        "eps": _norm.EPS,
        "weight_offset": _offset,
    },
    dtypes=("float32", "float16", "bfloat16", "float64"),
    tiling_cases=_norm.tiling_cases(),
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
        bytes_moved=lambda call: _norm.row_bytes(call, passes=2, vectors=_norm.vectors(call, "weight")),
        backward_bytes=lambda call: _norm.row_bytes(call, passes=3, vectors=2 * _norm.vectors(call, "weight")),
        flops=lambda call: 4.0 * _norm.elements(call),
        backward_flops=lambda call: 9.0 * _norm.elements(call),
        shapes=_norm.bench_shapes(
            {"eps": 1e-6, "weight_offset": 1.0},
            peers=((8192, 4096, "bfloat16", True), (16384, 1024, "float16", True)),
        ),
    ),
)
