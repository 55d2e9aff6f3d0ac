"""What the normalisation specs share: generators of the hard cases, their tiling cases, and the
performance model (bytes moved, benchmark shapes).

A leading underscore keeps the registry from looking for a spec here.
"""

from __future__ import annotations

from hypothesis import strategies as st

from harness import BenchShape, TilingCase

# Value kinds of a norm's input: the usual scales, the extremes (huge: 1e4 and up, where fp16
# squares overflow; tiny: 1e-12, variance far below eps) and rows whose statistics are degenerate.
INPUT_VALUES = ("normal", "large", "small", "huge", "tiny", "constant_rows", "mixed_scales")
WEIGHT_VALUES = ("normal", "small", "positive")

EPS = st.sampled_from((1e-5, 1e-6, 1e-12, 0.1)) | st.floats(1e-8, 1e-2)
BAD_EPS = [-1e-5, float("nan"), float("inf")]

# The norms' tiling paths at CPU scale (kernels/_norm.py's small tiles: 64-column blocks, backward
# tiles of 4 rows, row groups of 2 tiles, each group one row of weight-gradient partial sums).
# Every optional weight and bias vector is passed (the paths read them block by block, and
# gradients of each are reduced over the row groups); ``scalars`` pins options the paths need.
def tiling_cases(**scalars) -> tuple[TilingCase, ...]:
    return (
        TilingCase("rows of three 64-column blocks, the last partial (the streamed forward, the backward's "
                   "row-sums and column kernels) in two backward row groups",
                   dims={"*batch": [2], "rows": 6, "cols": 129}, scalars=scalars),
        TilingCase("rows of one block in three backward tiles, the last partial, over two row groups (partial "
                   "sums of several groups)", dims={"*batch": [2], "rows": 5, "cols": 33}, scalars=scalars),
    )


# ---- performance model ------------------------------------------------------------------------


def elements(call) -> int:
    """The rows x cols elements of a call's input (its batch dims folded into the rows)."""
    return call["x"].numel()


def row_bytes(call, passes: int, vectors: int = 0) -> float:
    """``passes`` full reads/writes of the input's elements plus ``vectors`` per-column vectors (the
    weight, biases and their gradients a call passes), in the call's dtype."""
    return (passes * elements(call) + vectors * call["x"].shape[-1]) * call.dtype.itemsize


def vectors(call, *names: str) -> int:
    """How many of the per-column tensors ``names`` the call passes."""
    return sum(call.passes(name) for name in names)


# Hidden sizes 256..16384 at 16M elements per tensor (32 MB in bf16: beyond the H100's L2 once
# input and output are counted), plus the peers' shapes (shared/notes/peers-h100.md).
SWEEP = (256, 512, 1024, 2048, 4096, 8192, 16384)
SWEEP_ELEMENTS = 1 << 24


def bench_shapes(scalars: dict, peers: tuple[tuple[int, int, str, bool], ...]) -> tuple[BenchShape, ...]:
    """The peers' shapes (rows, cols, dtype, quick) and the bf16 hidden-size sweep."""
    shapes = [BenchShape({"rows": r, "cols": c}, d, scalars, quick=q) for r, c, d, q in peers]
    seen = {(r, c, d) for r, c, d, _ in peers}
    for cols in SWEEP:
        rows = SWEEP_ELEMENTS // cols
        if (rows, cols, "bfloat16") not in seen:
            shapes.append(BenchShape({"rows": rows, "cols": cols}, "bfloat16", scalars))
    return tuple(shapes)
