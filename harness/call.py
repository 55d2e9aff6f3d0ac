"""One exact call of a kernel, as the spec's hooks and performance model see it.

PyTorch's OpInfo hands each test a ``SampleInput(input, args, kwargs)``: the call itself, nothing
to reassemble. A ``Call`` is the same for a spec: ``kwargs`` are the arguments exactly as the
kernel and the reference receive them (every tensor by name, ``None`` for an optional tensor the
call leaves out, every scalar), and beside them the context a hook may need: the case's sizes by
dim name, its dtype, and, for a kernel that draws a dropout mask, the kernel's own keep-mask that
the harness replays into the reference.

Where a hook sees a ``Call``:

- ``Numerics.term_magnitudes(call)``, ``gradient_term_magnitudes(call, grad_outputs)``,
  ``gradient_rounded_terms(call, grad_outputs)`` and each ``approximate_math`` hook ``(call)``:
  ``kwargs`` hold fp64 copies of the case's tensors;
- ``PerfModel``'s ``bytes_moved``, ``flops``, ``backward_bytes`` and ``backward_flops`` ``(call)``:
  at a benchmark shape, ``kwargs`` hold tensors on the ``meta`` device (shapes and dtypes, no data),
  so a model reads sizes, options and which optional tensors are passed from the call itself.

The reference and the implementations are called with ``**call.kwargs`` (and a random spec's
reference with the mask as its ``RandomSpec.reference_mask`` keyword).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Call:
    """A kernel's arguments by name (``kwargs``), its sizes (``dims``: dim name -> size, ``'*batch'``
    -> list of sizes), its dtype and, for a random spec, the replayed keep-mask (else None).
    ``call["x"]`` is ``call.kwargs["x"]``."""

    kwargs: Mapping[str, Any]
    dims: Mapping[str, Any]
    dtype: torch.dtype
    mask: torch.Tensor | None = None

    def __getitem__(self, name: str) -> Any:
        try:
            return self.kwargs[name]
        except KeyError:
            raise KeyError(f"the call has no argument {name!r}; its arguments: {sorted(self.kwargs)}") from None

    def passes(self, name: str) -> bool:
        """Whether the call passes the tensor ``name`` (False for an optional tensor left out)."""
        return self[name] is not None


class Drawn(Mapping):
    """What a scalar's strategy function receives: the case's sizes by dim name, as a mapping (so a
    function of the sizes reads ``drawn["tables"]``), and ``present``, the names of the tensors the
    call passes (a scalar valid only beside an optional tensor draws from what that allows)."""

    def __init__(self, dims: Mapping[str, Any], present: frozenset[str]):
        self._dims = dict(dims)
        self.present = present

    def __getitem__(self, name: str) -> Any:
        return self._dims[name]

    def __iter__(self):
        return iter(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    def __repr__(self) -> str:
        return f"Drawn({self._dims!r}, present={sorted(self.present)!r})"
