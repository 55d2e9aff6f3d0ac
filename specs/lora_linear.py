"""Fused LoRA linear, ``x @ weight^T + scale * (x @ lora_a^T) @ lora_b^T`` with weight frozen:
the Triton kernel (low-rank path fused into the base matmul) against the eager composition."""

from hypothesis import strategies as st
from torch.nn import functional as F

from harness import BadInput, Batch, BenchShape, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.lora_linear as kernel
import references.lora_linear as reference
from specs import _unreached


def _dims(dims):
    return dims["rows"], dims["out_features"], dims["in_features"], dims["rank"]


def _forward_bytes(call):
    """Read x, weight, lora_a, lora_b; write the output (xa, M x r, is noise)."""
    dims = call.dims
    m, n, k, r = _dims(dims)
    return (m * k + n * k + r * k + n * r + m * n) * call.dtype.itemsize


def _backward_bytes(call):
    """Read grad, weight, x, lora_a, lora_b; write grad_x, grad_lora_a, grad_lora_b."""
    dims = call.dims
    m, n, k, r = _dims(dims)
    return (m * n + n * k + 2 * m * k + 2 * (r * k + n * r)) * call.dtype.itemsize


def _forward_flops(call):
    dims = call.dims
    m, n, k, r = _dims(dims)
    return 2.0 * m * n * k + 2.0 * m * k * r + 2.0 * m * n * r


def _backward_flops(call):
    """grad_x (base and low-rank), gb = g @ lora_b, grad_lora_a, grad_lora_b."""
    dims = call.dims
    m, n, k, r = _dims(dims)
    return 2.0 * m * n * k + 2.0 * m * k * r + 2.0 * m * n * r + 2.0 * m * k * r + 2.0 * m * n * r


def _base_matmul(x, weight, lora_a, lora_b, scale):
    """The bare base matmul ``x @ weight^T`` (cuBLAS), timed beside the kernel so that the
    benchmark states what the fused low-rank path costs on top of it (forward+backward: the base's
    grad x only, weight being frozen)."""
    return F.linear(x, weight)


def _shape(m, n, k, r, dtype, scale=2.0, quick=False):
    dims = {"rows": m, "out_features": n, "in_features": k, "rank": r}
    return BenchShape(dims, dtype, {"scale": scale}, quick=quick)


def _other_rank(kw):
    """lora_a and lora_b of rank 12, which the kernel does not support."""
    a, b = kw["lora_a"], kw["lora_b"]
    return {**kw, "lora_a": a.new_zeros((12, a.shape[1])), "lora_b": b.new_zeros((b.shape[0], 12))}


SPEC = KernelSpec(
    name="lora_linear",
    description="x @ W^T + scale * (x @ A^T) @ B^T, W frozen, A and B trainable; low-rank path fused",
    reference=reference.lora_linear,
    implementations={"triton": kernel.lora_linear},
    tensors=(
        TensorArg("x", dims=("*batch", "rows", "in_features"), grad=True, values=("normal", "large", "small")),
        TensorArg("weight", dims=("out_features", "in_features"), grad=False, values=("normal", "small")),
        TensorArg("lora_a", dims=("rank", "in_features"), grad=True, values=("normal", "small")),
        TensorArg("lora_b", dims=("out_features", "rank"), grad=True, values=("normal", "small")),
    ),
    dims={
        "*batch": Batch(max_rank=1, cpu_max=2, gpu_max=3),
        # CPU: 16-wide tiles under the interpreter; up to 36 crosses two tile edges.
        "rows": Dim(cpu_max=20, gpu_max=600, boundaries=kernel.block_boundaries),
        "in_features": Dim(cpu_max=36, gpu_max=300, boundaries=kernel.block_boundaries),
        "out_features": Dim(cpu_max=36, gpu_max=600, boundaries=kernel.block_boundaries),
        "rank": Dim(cpu_max=64, gpu_max=64, choices=kernel.RANKS),
    },
    scalars={"scale": st.sampled_from((1.0, 2.0, 0.5, 0.0)) | st.floats(-4.0, 4.0, allow_nan=False, width=32)},
    bad_scalars={"scale": [float("nan"), float("inf"), "2"]},
    bad_inputs=(
        BadInput("lora_a and lora_b of rank 12 (not 8, 16, 32 or 64)", "lora_a", _other_rank),
        BadInput("a weight that requires grad (it is frozen)", "weight",
                 lambda kw: {**kw, "weight": kw["weight"].detach().clone().requires_grad_(True)}),
        BadInput("weight of rank 1", "weight", lambda kw: {**kw, "weight": kw["weight"][0]}),
    ),
    unreached_on_cpu=_unreached.MATMUL,
    dtypes=("float16", "bfloat16"),
    numerics=Numerics(
        error_multiple=2.0,
        gradient_error_multiple=4.0,
        term_magnitudes=lambda call: reference.term_magnitudes(**call.kwargs, dtype=call.dtype),
        gradient_term_magnitudes=lambda call, grad_outputs: reference.gradient_term_magnitudes(
            **call.kwargs, grad_outputs=grad_outputs, dtype=call.dtype),
        # products summed in fp32; the gradient hook weighs the 16-bit roundings itself
        term_precision="float32",
    ),
    perf=PerfModel(
        bytes_moved=_forward_bytes,
        backward_bytes=_backward_bytes,
        flops=_forward_flops,
        backward_flops=_backward_flops,
        peers={"base_matmul": _base_matmul},
        shapes=(
            # the point: 8 K tokens, hidden 4096, rank 16
            _shape(8192, 4096, 4096, 16, "bfloat16", quick=True),
            _shape(8192, 4096, 4096, 64, "bfloat16"),
            _shape(8192, 11008, 4096, 16, "bfloat16"),  # an MLP up-projection
            _shape(4096, 4096, 4096, 8, "float16", scale=1.0),
        ),
    ),
)
