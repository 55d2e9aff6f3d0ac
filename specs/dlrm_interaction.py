"""DLRM dot interaction: the Triton kernel against eager ``bmm`` + ``tril_indices`` gather."""

from harness import BenchShape, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.dlrm_interaction as kernel
import references.dlrm_interaction as reference


def _pairs(dims):
    t = dims["features"] + 1
    return t * (t - 1) // 2


def _forward_bytes(call):
    """Read dense and sparse, write dense again and the pairs."""
    dims = call.dims
    b, d = dims["batch"], dims["dim"]
    return b * ((d + dims["features"] * d) + (d + _pairs(dims))) * call.dtype.itemsize


def _backward_bytes(call):
    """Read the output's gradient, dense and sparse; write their gradients."""
    dims = call.dims
    b, d = dims["batch"], dims["dim"]
    return b * ((d + _pairs(dims)) + 2 * (d + dims["features"] * d)) * call.dtype.itemsize


def _shape(batch, dim, dtype, quick=False):
    return BenchShape({"batch": batch, "features": 26, "dim": dim}, dtype, quick=quick)


SPEC = KernelSpec(
    name="dlrm_interaction",
    description="DLRM dot interaction: concat(dense, strict lower triangle of Z Z^T), Z = stack(dense, sparse)",
    reference=reference.dlrm_interaction,
    numerics=Numerics(
        term_magnitudes=lambda call: reference.term_magnitudes(**call.kwargs),
        gradient_term_magnitudes=lambda call, grad_outputs: reference.gradient_term_magnitudes(
            **call.kwargs, grad_outputs=grad_outputs),
        term_precision="float32",  # tl.dot accumulates exact 16-bit products in fp32
        # fp32 pairs are dot products of dim terms that may cancel; the kernel's tl.dot sums them in
        # another order than eager's bmm (the term magnitudes floor the envelope at an ulp of the
        # terms; a sum of dim terms may differ by several). Found by a seeded CI run: fp32, 1 feature, dim 16,
        # a pair of -0.00276 2.42x eager's envelope; in units of eps * sum_d |z_id z_jd| the kernel's
        # worst error was 1.35 and eager's 0.44 (a 16-term sum may reach 16). fp16/bf16 results are
        # dominated by their final rounding and keep multiple 2.
        error_multiple={"float32": 4.0, "float16": 2.0, "bfloat16": 2.0},
        # dZ_t = sum_j (G + G^T)_tj Z_j sums 2T terms in another order than eager (which forms G Z and
        # G^T Z by two bmm calls and adds them); where the terms cancel or one dominates (a dense row
        # of scale 1e2 against unit sparse rows), the one-ulp errors of the terms become several ulps
        # of the result at other elements than eager's (the gradient term magnitudes floor the
        # envelope at one ulp of the 2T terms; a reordered sum of them may differ by several). Found by
        # the CI profile: fp32, batch 1, 11 features, dim 5, grad sparse 2.07x eager's envelope, the
        # kernel's error (7e-5 at 284) about 2 eps * sum_j |terms| there, within a 12-term fp32 sum's bound.
        gradient_error_multiple=4.0,
    ),
    implementations={"triton": kernel.dlrm_interaction},
    tensors=(
        TensorArg("dense", dims=("batch", "dim"), grad=True, values=("normal", "large", "small", "mixed_scales")),
        TensorArg("sparse", dims=("batch", "features", "dim"), grad=True, values=("normal", "small", "mixed_scales")),
    ),
    dims={
        "batch": Dim(cpu_max=5, gpu_max=300, boundaries=kernel.block_boundaries),
        # CPU: T = features + 1 up to 17, past the 16-row tile; GPU: up to 64 tables (T pads to 128).
        "features": Dim(cpu_max=17, gpu_max=64),
        # dim pads to a power of two >= 16: 1..40 covers padding within one tile and past 32.
        "dim": Dim(cpu_max=40, gpu_max=260),
    },
    dtypes=("float32", "float16", "bfloat16"),
    perf=PerfModel(
        bytes_moved=_forward_bytes,
        backward_bytes=_backward_bytes,
        # Each pair is a dot product of dim terms (the kernel forms the full Gram tile, but only the
        # triangle is useful work); the backward's (G + G^T) Z is two such products per pair.
        flops=lambda call: 2.0 * call.dims["batch"] * _pairs(call.dims) * call.dims["dim"],
        backward_flops=lambda call: 4.0 * call.dims["batch"] * _pairs(call.dims) * call.dims["dim"],
        shapes=(
            _shape(2048, 64, "float16"),
            _shape(16384, 128, "float16", quick=True),
            _shape(65536, 128, "float16"),
            _shape(65536, 16, "float32"),
            _shape(16384, 64, "bfloat16"),
            _shape(65536, 64, "float32"),
        ),
    ),
)
