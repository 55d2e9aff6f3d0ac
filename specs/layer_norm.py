"""LayerNorm over the last dimension: the Triton kernel against ``F.layer_norm``."""

from harness import BadInput, Batch, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.layer_norm as kernel
import references.layer_norm as reference
from specs import _norm, _peers, _unreached


def _terms(call):
    return reference.term_magnitudes(**call.kwargs)


def _gradient_terms(call, grad_outputs):
    return reference.gradient_term_magnitudes(**call.kwargs, grad_output=grad_outputs[0])


SPEC = KernelSpec(
    name="layer_norm",
    description="LayerNorm over the last dimension, weight and bias optional, fp32 statistics",
    reference=reference.layer_norm,
    implementations={"triton": kernel.layer_norm},
    tensors=(
        TensorArg("x", dims=("*batch", "rows", "cols"), grad=True, values=_norm.INPUT_VALUES),
        TensorArg("weight", dims=("cols",), grad=True, values=_norm.WEIGHT_VALUES, optional=True),
        TensorArg("bias", dims=("cols",), grad=True, values=("normal",), optional=True),
    ),
    dims={
        "*batch": Batch(max_rank=1, cpu_max=2, gpu_max=3),
        "rows": Dim(cpu_max=6, gpu_max=512),
        # Past two interpreter blocks (CPU); past the split limit of forward and backward (GPU).
        "cols": Dim(cpu_max=140, gpu_max=20500, boundaries=kernel.block_boundaries),
    },
    scalars={"eps": _norm.EPS},
    dtypes=("float32", "float16", "bfloat16", "float64"),
    tiling_cases=_norm.tiling_cases(),
    unreached_on_cpu=_unreached.NORMS,
    numerics=Numerics(
        error_multiple=2.0,
        term_magnitudes=_terms,
        gradient_term_magnitudes=_gradient_terms,
        term_precision="float32",  # formed in fp32 from the exact inputs
    ),
    bad_scalars={"eps": _norm.BAD_EPS},
    bad_inputs=(BadInput("a 0-d tensor (no dimension to normalise over)", "x", lambda kw: {**kw, "x": kw["x"][(0,) * kw["x"].ndim]}),),
    perf=PerfModel(
        peers=_peers.LAYER_NORM,
        # Forward: read x, write y (weight and bias: one row each, where passed). Backward: read x and
        # dy, write dx (the saved statistics are 12 bytes per row); read weight, write dweight and dbias.
        bytes_moved=lambda call: _norm.row_bytes(call, passes=2, vectors=_norm.vectors(call, "weight", "bias")),
        backward_bytes=lambda call: _norm.row_bytes(
            call, passes=3, vectors=_norm.vectors(call, "weight") + _norm.vectors(call, "weight", "bias")),
        flops=lambda call: 8.0 * _norm.elements(call),
        backward_flops=lambda call: 14.0 * _norm.elements(call),
        shapes=_norm.bench_shapes(
            {"eps": 1e-5},
            peers=((8192, 4096, "bfloat16", True), (16384, 1024, "float16", True)),
        ),
    ),
)
