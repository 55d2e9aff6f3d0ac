"""Reference for ``kernels.dlrm_embedding.dlrm_embedding``: one eager ``F.embedding`` per table.

Table f is the slice ``weights[offset_f : offset_f + cardinality_f]``; id x looks up row
``torch.remainder(x + 1, cardinality_f)`` of it (the tensor addition wraps at 2^63 - 1; the
remainder is non-negative). The per-table results are stacked to (batch, features, dim).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from references._terms import gradient_terms


def dlrm_embedding(ids: torch.Tensor, weights: torch.Tensor, cardinalities) -> torch.Tensor:
    columns = []
    offset = 0
    for f, card in enumerate(cardinalities):
        index = torch.remainder(ids[:, f].to(torch.int64) + 1, card)
        columns.append(F.embedding(index, weights[offset : offset + card]))
        offset += card
    return torch.stack(columns, dim=1)


def gradient_term_magnitudes(ids: torch.Tensor, weights: torch.Tensor, cardinalities, grad_outputs) -> dict:
    """The weights' gradient is a scatter-add of grad_output rows into table rows: each element
    sums |grad_output| over the lookups that hit it (``harness.numerics``). Such a sum cancels,
    and the kernel adds in another order than eager (an H100 case: 293 lookups into 31 rows of
    width 1, where a row's "row" of the envelope is one element, scored 2.64 at -1.14 summed from
    ~10 terms of ~1)."""
    (grad,) = grad_outputs
    return gradient_terms(dlrm_embedding, {"weights": weights}, grad, ids=ids, cardinalities=cardinalities)
