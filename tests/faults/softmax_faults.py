"""Broken softmax variants, each with the signature of ``kernels.softmax.softmax``.

Every fault is correct except for the one planted bug its docstring names, and the docstring says
which inputs expose it. See ``_softmax_base`` for the kernels.
"""

from __future__ import annotations

import torch

from . import _softmax_base as base


def softmax_ignores_row_stride(x: torch.Tensor) -> torch.Tensor:
    """Forward reads row r at ``r * N`` instead of at its real row offset.

    Exposed by any layout whose rows are not N apart while the last dim is unit-stride: row
    slices ``x[::2]``, column slices ``x[:, :k]`` of a wider tensor, gaps filled with NaN, permuted
    leading dims of a 3-D tensor, expanded (stride-0) rows. Contiguous inputs, and inputs copied
    because their last dim is strided (``x.t()``, ``x[:, ::2]``), come out right. Reading rows
    N apart can run past the end of a stepped or expanded tensor's storage: guard bands or the
    compute sanitizer see that too. Backward is correct.
    """
    return base.softmax(x, assume_dense_rows=True)


def softmax_no_max_subtraction(x: torch.Tensor) -> torch.Tensor:
    """Computes ``exp(x) / sum(exp(x))`` without subtracting the row max first.

    Exposed by logits above ~88 (exp overflows fp32 to inf, the row turns NaN) and by rows whose
    logits are all below ~-88 (every exp underflows to 0: 0/0 = NaN). Small logits are fine.
    """
    return base.softmax(x, subtract_max=False)


def softmax_drops_last_lane(x: torch.Tensor) -> torch.Tensor:
    """Off-by-one load mask: the last lane of every block (``BLOCK - 1``) is never read.

    That element reads as -inf: its output is 0 and the rest of its row is normalised without it.
    Exposed exactly when a row reaches a block's last lane: N equal to the block width (a power of
    two up to the single-block limit: 1, 2, ..., 64 under the interpreter) and every N above that
    limit (65, 129, ...). N = BLOCK - 1 and other lengths below the limit (3, 33, 63 under the
    interpreter) come out right, so only block-boundary shapes catch it.
    """
    return base.softmax(x, drop_last_lane=True)


def softmax_wrong_backward(x: torch.Tensor) -> torch.Tensor:
    """Correct forward; backward computes ``dx = y * dy``, dropping ``- y * sum(y * dy)``.

    Exposed by any gradient check with a generic grad_output. A grad_output that is constant along
    each row also gives the wrong answer (true dx is 0 there), so it is not a blind spot.
    """
    return base.softmax(x, drop_sum_term=True)


def softmax_half_precision_sum(x: torch.Tensor) -> torch.Tensor:
    """For fp16/bf16 inputs, accumulates the sum of exponentials in the input's 16-bit dtype.

    A looped kernel with a 16-bit accumulator per lane: each lane adds one exponential per block
    of the row, every add rounded to 16 bits, then the lanes are added, rounded too. Small terms
    vanish against the running sums, so the sum comes out short and every output of the row a
    little too large. A precision bug, not a gross one: it shows on long rows (many adds per lane);
    fp32 and fp64 inputs are unaffected (fp64 accumulation there).
    """
    return base.softmax(x, half_precision_sum=True)


FAULTS = {
    f.__name__: f
    for f in (
        softmax_ignores_row_stride,
        softmax_no_max_subtraction,
        softmax_drops_last_lane,
        softmax_wrong_backward,
        softmax_half_precision_sum,
    )
}
