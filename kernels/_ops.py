"""Each kernel as a PyTorch custom op (``torch.ops.fkh.<name>``), so that ``torch.compile`` traces
through it in one graph and a CUDA graph captures it.

Why ``torch.library.custom_op`` and not ``torch.library.triton_op``: ``triton_op`` lets Inductor
look inside the op, which it can only do for Triton kernels launched through ``wrap_triton``.
Ours launch through ``kernels._launch`` (a cached launcher that costs a few microseconds of host
time where Triton's own path costs tens), and each op already is one fused kernel, or a few, so
there is nothing left for Inductor to fuse inside it. A ``custom_op`` is opaque to the compiler:
Dynamo records one call, AOTAutograd reads its fake implementation for shapes and its registered
autograd for the backward, and Inductor's generated code calls it like an ATen kernel.

Every op is two ops: the forward, which returns its outputs and the tensors its backward reads
(row statistics, a saved product), and the backward, which returns a list of the gradients asked
for (a custom op returns no optional tensors; :func:`unpack` puts the Nones back). Neither returns
a view of an input or of another output (the custom-op contract ``torch.library.opcheck``
checks): where a kernel's gradients come out of one buffer, the op returns the buffer and the
autograd formula takes it apart.

The plain entry points (``kernels.layer_norm.layer_norm`` & co.) stay the eager path: the
dispatcher's work for a custom op costs host time that an eager call need not pay
(docs/performance.md). They call the custom op instead when :func:`route` says so: while Dynamo
traces them (inside ``torch.compile``), or inside ``harness.validate.custom_ops_routed()`` (the
harness's opcheck check, or a user who wants the ops in an eager trace).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from harness.validate import call_custom_op as route  # noqa: F401 - the entry points' switch

NAMESPACE = "fkh"


def op(name: str, schema: str):
    """``torch.library.custom_op("fkh::<name>")`` with an explicit schema (the kernels' modules use
    postponed annotations, so the schema is written out rather than inferred). Mutates nothing."""
    return torch.library.custom_op(f"{NAMESPACE}::{name}", mutates_args=(), schema=schema)


def unpack(grads: Sequence[torch.Tensor], present: Sequence[bool]) -> tuple[torch.Tensor | None, ...]:
    """A backward op's list of gradients, spread over the inputs: one per True in ``present``,
    None for each False."""
    it = iter(grads)
    return tuple(next(it) if here else None for here in present)


def asked(grads: Sequence[torch.Tensor | None], needs: Sequence[bool], rest: int = 0) -> tuple:
    """An autograd formula's return: each gradient where its input needs one (``ctx.needs_input_grad``,
    in order), else None, then ``rest`` Nones for the non-tensor arguments."""
    return tuple(g if need else None for g, need in zip(grads, needs)) + (None,) * rest


def rows(x: torch.Tensor) -> int:
    """Rows of a ``(..., N)`` tensor (the product of its leading sizes; symbolic under tracing)."""
    return math.prod(x.shape[:-1])


def empty_like(x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A new contiguous tensor of x's shape (and dtype unless given): what the kernels return."""
    return torch.empty(x.shape, dtype=dtype or x.dtype, device=x.device)
