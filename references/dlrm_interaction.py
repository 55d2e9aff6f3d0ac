"""Reference for ``kernels.dlrm_interaction.dlrm_interaction``: DLRM's dot interaction, eager.

``Z = cat(dense[:, None], sparse)`` (batch, T, dim), all pairwise dot products ``Z Z^T`` by one
batched matmul, the strict lower triangle gathered with ``torch.tril_indices(T, T, -1)`` (row-major:
(1, 0), (2, 0), (2, 1), ...), and the dense vector in front, as DLRM's ``interact_features`` does.
"""

from __future__ import annotations

import torch

from references._terms import gradient_terms


def dlrm_interaction(dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
    z = torch.cat([dense.unsqueeze(1), sparse], dim=1)
    gram = torch.bmm(z, z.transpose(1, 2))
    t = z.shape[1]
    li, lj = torch.tril_indices(t, t, offset=-1, device=z.device)
    return torch.cat([dense, gram[:, li, lj]], dim=1)


def term_magnitudes(dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
    """The sum of |terms| behind each output element (``harness.numerics``): the interaction of
    the absolute values, ``|dense|`` in front and ``sum_d |z_id| |z_jd|`` for each pair."""
    return dlrm_interaction(dense.abs(), sparse.abs())


def gradient_term_magnitudes(dense: torch.Tensor, sparse: torch.Tensor, grad_outputs) -> dict:
    """The same for the gradients: ``dZ_t = sum_j (G + G^T)_tj Z_j`` is a sum of products, so the
    backward of the absolute values with |grad_output| sums the |terms|. A seeded CPU run found
    why it is needed: fp32, 14 features of width 1 (a gradient's row is one element), grad 2.01
    summed from ~14 terms of ~0.6, kernel 1e-6 off (about one ulp of the terms), eager exact by
    luck: 4.18x its envelope."""
    (grad,) = grad_outputs
    return gradient_terms(dlrm_interaction, {"dense": dense, "sparse": sparse}, grad)
