"""Term magnitudes of ops that are sums of products of their inputs (``harness.numerics``).

For such an op, evaluating it on the absolute values of its inputs sums the |terms| behind each
output element, and its backward on absolute values with |grad_output| sums the |terms| behind
each gradient element. A leading underscore: not a reference of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch


def gradient_terms(op: Callable[..., torch.Tensor], wrt: Mapping[str, torch.Tensor], grad_output: torch.Tensor,
                   **fixed) -> dict[str, torch.Tensor]:
    """{name: sum of |terms| of the gradient of ``op`` for that input}, for ``op(**wrt, **fixed)``
    a sum of products of the ``wrt`` tensors (``fixed``: indices, sizes and the like)."""
    leaves = {name: t.detach().abs().requires_grad_(True) for name, t in wrt.items()}
    grads = torch.autograd.grad(op(**leaves, **fixed), tuple(leaves.values()), grad_output.abs())
    return dict(zip(leaves, grads))
