"""What the elementwise specs (glu, bias_gelu, add_mul_act) share: the sizes that take their tiling
paths under the small tiles (kernels/_rows.py ``ELEMENTWISE_INTERPRETER_LIMITS``: 64-column blocks,
tiles of 4 rows, bias-gradient partial sums in row groups of 2 tiles), and the bytes a call with a
bias row moves.

A leading underscore keeps the registry from looking for a spec here.
"""

from __future__ import annotations

from harness import TilingCase

_DIMS = {"*batch": [2], "rows": 9, "cols": 129}

TILING_CASES = (TilingCase("rows of three 64-column blocks, the last partial, in five row tiles", dims=_DIMS),)
# with a bias whose gradient is reduced over the rows
BIAS_TILING_CASES = (TilingCase("rows of three 64-column blocks, the last partial, in five row tiles, three "
                                "bias-gradient row groups", dims=_DIMS),)


def bias_row_bytes(call, passes: int, bias_rows: int) -> float:
    """``passes`` full reads or writes of x's elements and ``bias_rows`` of the bias row's, in the
    call's dtype."""
    return (passes * call["x"].numel() + bias_rows * call["bias"].numel()) * call.dtype.itemsize
