"""Softmax variants that compute the right values but break torch.compile or CUDA graph capture,
each with the signature of ``kernels.softmax.softmax``: the faults of the graph checks
(``harness.graph_checks``). Each wraps the production kernel and adds one planted defect.
"""

from __future__ import annotations

import torch

from kernels import softmax as production


def softmax_reads_a_scalar(x: torch.Tensor) -> torch.Tensor:
    """Reads a value back to the host (``.item()``) to pick a path: a graph break under
    ``torch.compile(fullgraph=True)`` and a synchronisation that CUDA graph capture refuses."""
    if x.numel() and x.abs().amax().item() > 1e30:  # planted: a host read of the data
        x = x.clamp(-1e30, 1e30)
    return production.softmax(x)


def softmax_data_dependent_size(x: torch.Tensor) -> torch.Tensor:
    """Allocates a scratch buffer sized by the data (one slot per non-finite element): a size no
    fake tensor can know without the values, read back to the host, which capture refuses."""
    scratch = x.new_empty(int((~torch.isfinite(x)).sum()))  # planted: a data-dependent allocation
    del scratch
    return production.softmax(x)


@torch.library.custom_op("harness_faults::softmax_without_fake", mutates_args=())
def _softmax_op(x: torch.Tensor) -> torch.Tensor:
    return production.softmax(x.detach())


@torch.library.custom_op("harness_faults::softmax_without_fake_backward", mutates_args=())
def _softmax_backward_op(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    return y * (dy - (y * dy).sum(-1, keepdim=True))


@_softmax_backward_op.register_fake
def _(y, dy):
    return torch.empty_like(y, memory_format=torch.contiguous_format)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return _softmax_backward_op(y, dy)


_softmax_op.register_autograd(_backward, setup_context=_setup)


def softmax_without_fake(x: torch.Tensor) -> torch.Tensor:
    """A custom op with a schema and an autograd formula but no fake implementation (planted: no
    ``register_fake``): torch.compile cannot know its output's shape without running it."""
    return _softmax_op(x)


FAULTS = {f.__name__: f for f in (softmax_reads_a_scalar, softmax_data_dependent_size, softmax_without_fake)}
