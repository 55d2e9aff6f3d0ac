"""LayerNorm over the last dimension: the Triton kernel against ``F.layer_norm``."""

from hypothesis import strategies as st

from harness import BadInput, Batch, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.layer_norm as kernel
import references.layer_norm as reference
from specs import _norm, _peers, _unreached


def _triton(x, weight, bias, eps, affine):
    kernel.check_arguments(x, weight, bias, eps)  # every generated tensor, passed or not (specs/_norm.py)
    return kernel.layer_norm(x, _norm.keep(affine, "weight", weight), _norm.keep(affine, "bias", bias), eps)


def _reference(x, weight, bias, eps, affine):
    return reference.layer_norm(x, _norm.keep(affine, "weight", weight), _norm.keep(affine, "bias", bias), eps)


def _terms(x, weight, bias, eps, affine):
    return reference.term_magnitudes(x, _norm.keep(affine, "weight", weight), _norm.keep(affine, "bias", bias), eps)


def _gradient_terms(x, weight, bias, eps, affine, grad_outputs):
    return reference.gradient_term_magnitudes(x, _norm.keep(affine, "weight", weight), _norm.keep(affine, "bias", bias),
                                              eps, grad_outputs[0])


SPEC = KernelSpec(
    name="layer_norm",
    description="LayerNorm over the last dimension, weight and bias optional, fp32 statistics",
    reference=_reference,
    implementations={"triton": _triton},
    tensors=(
        TensorArg("x", dims=("*batch", "rows", "cols"), grad=True, values=_norm.INPUT_VALUES),
        TensorArg("weight", dims=("cols",), grad=True, values=_norm.WEIGHT_VALUES),
        TensorArg("bias", dims=("cols",), grad=True, values=("normal",)),
    ),
    dims={
        "*batch": Batch(max_rank=1, cpu_max=2, gpu_max=3),
        "rows": Dim(cpu_max=6, gpu_max=512),
        # Past two interpreter blocks (CPU); past the split limit of forward and backward (GPU).
        "cols": Dim(cpu_max=140, gpu_max=20500, boundaries=kernel.block_boundaries),
    },
    scalars={"eps": _norm.EPS, "affine": st.sampled_from(_norm.AFFINE)},
    dtypes=("float32", "float16", "bfloat16", "float64"),
    tiling_cases=_norm.tiling_cases(affine="weight+bias"),
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
        # Forward: read x, write y (weight and bias: one row each). Backward: read x and dy, write
        # dx (the saved statistics are 12 bytes per row), dweight and dbias.
        bytes_moved=lambda dims, dtype: _norm.row_bytes(dims, dtype, passes=2, vectors=2),
        backward_bytes=lambda dims, dtype: _norm.row_bytes(dims, dtype, passes=3, vectors=3),
        flops=lambda dims, dtype: 8.0 * _norm.elements(dims),
        backward_flops=lambda dims, dtype: 14.0 * _norm.elements(dims),
        shapes=_norm.bench_shapes(
            {"eps": 1e-5, "affine": "weight+bias"},
            peers=((8192, 4096, "bfloat16", True), (16384, 1024, "float16", True)),
        ),
    ),
)
