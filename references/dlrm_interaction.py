"""Reference for ``kernels.dlrm_interaction.dlrm_interaction``: DLRM's dot interaction, eager.

``Z = cat(dense[:, None], sparse)`` (batch, T, dim), all pairwise dot products ``Z Z^T`` by one
batched matmul, the strict lower triangle gathered with ``torch.tril_indices(T, T, -1)`` (row-major:
(1, 0), (2, 0), (2, 1), ...), and the dense vector in front, as DLRM's ``interact_features`` does.
"""

from __future__ import annotations

import torch


def dlrm_interaction(dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
    z = torch.cat([dense.unsqueeze(1), sparse], dim=1)
    gram = torch.bmm(z, z.transpose(1, 2))
    t = z.shape[1]
    li, lj = torch.tril_indices(t, t, offset=-1, device=z.device)
    return torch.cat([dense, gram[:, li, lj]], dim=1)
