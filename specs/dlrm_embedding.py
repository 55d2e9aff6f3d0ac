"""DLRM hashed embedding lookup fused across tables: the Triton kernel against one eager
``F.embedding`` over the concatenated tables, row ``offset + (id + 1) mod cardinality``.

Ids come from ``int64_ids`` (anywhere in int64, a quarter at -2^63, -2, -1, 0, 1 and 2^63 - 1,
where id + 1 wraps) and ``tokens`` (0..7: many lookups of one row, so the backward's sums over
repeated rows are exercised). Cardinalities are drawn per case from the drawn sizes: often tiny
(1 to 3 rows: every lookup of the table collides), up to an even share of the rows, and sometimes
filling the weights exactly; rows past the last table must get a zero gradient.

Deterministic: the backward sorts the lookups (stable) and sums each row's gradients in one
program in lookup order; no atomics (see ``kernels/dlrm_embedding.py``).
"""

from hypothesis import strategies as st

from harness import BadInput, BenchShape, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.dlrm_embedding as kernel
import references.dlrm_embedding as reference


def _cardinalities(dims):
    features, rows = dims["features"], dims["rows"]
    share = rows // features  # >= 1: rows' minimum is features' maximum
    # Capped at the even share, so the tables always fit in the weights (a GPU case with 27 tables
    # in 31 rows once drew 1-3 rows each, 32 in all).
    each = (st.sampled_from((1, 2, 3)) | st.integers(1, share)).map(lambda c: min(c, share))
    exact = [share] * (features - 1) + [rows - share * (features - 1)]
    return st.lists(each, min_size=features, max_size=features) | st.just(exact)


def _lookups(dims):
    return dims["batch"] * dims["features"]


def _forward_bytes(call):
    """Read the ids and one weight row per lookup, write the rows."""
    dims = call.dims
    return _lookups(dims) * (8 + 2 * dims["dim"] * call.dtype.itemsize)


def _backward_bytes(call):
    """Read the output's gradient; write the whole (dense) gradient of the weights."""
    dims = call.dims
    size = call.dtype.itemsize
    return (_lookups(dims) + dims["rows"]) * dims["dim"] * size


def _shape(batch, dim, cardinality, dtype, quick=False):
    dims = {"batch": batch, "features": 26, "rows": 26 * cardinality, "dim": dim}
    return BenchShape(dims, dtype, {"cardinalities": [cardinality] * 26}, quick=quick)


_MAX_CPU_FEATURES = 5

SPEC = KernelSpec(
    name="dlrm_embedding",
    description="hashed embedding lookup over concatenated tables: weights[offset_f + (id + 1) mod card_f]",
    reference=reference.dlrm_embedding,
    numerics=Numerics(
        gradient_term_magnitudes=lambda call, grad_outputs: reference.gradient_term_magnitudes(
            **call.kwargs, grad_outputs=grad_outputs),
        term_precision="float32",  # 16-bit tables' gradients are summed in fp32 (fp32 tables in fp64)
        error_multiple=1.0,  # the forward copies rows: nothing to round
        # The backward sums each row's repeated lookups, in another order than eager's: the standard
        # budget for sums (an H100 nightly case, 65 lookups into 32 rows, scored 1.33 against 1).
        gradient_error_multiple=2.0,
    ),
    implementations={"triton": kernel.dlrm_embedding},
    tensors=(
        TensorArg("ids", dims=("batch", "features"), dtype="int64", values=("int64_ids", "tokens")),
        TensorArg("weights", dims=("rows", "dim"), grad=True, values=("normal", "large", "mixed_scales")),
    ),
    dims={
        "batch": Dim(cpu_max=6, gpu_max=600),
        "features": Dim(cpu_max=_MAX_CPU_FEATURES, gpu_max=30),
        # At least one row per table on either backend (features' GPU maximum).
        "rows": Dim(min=30, cpu_max=90, gpu_max=5000),
        "dim": Dim(cpu_max=40, gpu_max=300),
    },
    scalars={"cardinalities": _cardinalities},
    dtypes=("float32", "float16", "bfloat16"),
    bad_scalars={"cardinalities": [[], [0], [-1], [10**12], "8", 3, [2.0]]},
    bad_inputs=(
        BadInput("float ids", "ids", lambda kw: {**kw, "ids": kw["ids"].to(kw["weights"].dtype)}),
        BadInput("1-d weights", "weights", lambda kw: {**kw, "weights": kw["weights"][0]}),
    ),
    perf=PerfModel(
        bytes_moved=_forward_bytes,
        backward_bytes=_backward_bytes,
        shapes=(
            _shape(2048, 64, 100_000, "float16"),
            _shape(16384, 64, 100_000, "float16", quick=True),
            _shape(65536, 128, 100_000, "float16"),
            _shape(65536, 16, 1_000_000, "float32"),
            _shape(16384, 128, 20_000, "float32"),
        ),
        # one lookup into one table of the fewest rows: the cardinalities follow the features
        launch_shape=BenchShape({"batch": 1, "features": 1, "rows": 30, "dim": 1}, "float16", {"cardinalities": [30]}),
    ),
)
