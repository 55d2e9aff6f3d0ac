"""Reference for ``kernels.dlrm_embedding.dlrm_embedding``: one eager ``F.embedding`` over the
concatenated tables.

Table f is the slice ``weights[offset_f : offset_f + cardinality_f]`` (``offset_f`` the sum of the
cardinalities before it); id x of feature f looks up row ``offset_f + torch.remainder(x + 1,
cardinality_f)`` of the weights (the tensor addition wraps at 2^63 - 1; the remainder is
non-negative). One lookup over the whole weights rather than one per table slice: a slice's
backward materialises a gradient of the whole weights, so 26 tables made 26 of them, and at 26 M
rows in fp64 (the checks' oracle) that ran an 80 GB GPU out of memory.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from references._terms import gradient_terms


def dlrm_embedding(ids: torch.Tensor, weights: torch.Tensor, cardinalities) -> torch.Tensor:
    cards, offsets = _tables(tuple(int(c) for c in cardinalities), ids.device)
    return F.embedding(offsets + torch.remainder(ids.to(torch.int64) + 1, cards), weights)


def _tables(cards: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The cardinalities and each table's first row, as tensors on ``device``. Made once per list
    and device, as a model keeps them in buffers: made per call, their host-to-device copy would
    make the host wait for the GPU, and the benchmarks would time eager's launches with its work.
    Under torch.compile they are the compiled graph's constants (dynamo traces past a cache)."""
    if torch.compiler.is_compiling():
        return _make_tables(cards, device)
    return _cached_tables(cards, device)


def _make_tables(cards: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    sizes = torch.tensor(cards, dtype=torch.int64, device=device)
    return sizes, torch.cumsum(sizes, 0) - sizes


_cached_tables = functools.lru_cache(maxsize=64)(_make_tables)


def gradient_term_magnitudes(ids: torch.Tensor, weights: torch.Tensor, cardinalities, grad_outputs) -> dict:
    """The weights' gradient is a scatter-add of grad_output rows into table rows: each element
    sums |grad_output| over the lookups that hit it (``harness.numerics``). Such a sum cancels,
    and the kernel adds in another order than eager (an H100 case: 293 lookups into 31 rows of
    width 1, where a row's "row" of the envelope is one element, scored 2.64 at -1.14 summed from
    ~10 terms of ~1)."""
    (grad,) = grad_outputs
    return gradient_terms(dlrm_embedding, {"weights": weights}, grad, ids=ids, cardinalities=cardinalities)
