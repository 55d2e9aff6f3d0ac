"""dlrm_interaction's fp32 backward is correctly rounded, on the kernels' device.

Every product of the fp32 backward is exact in fp64 and the sums stay in fp64 (``WIDE_SUM``), so each
gradient element must be the exact value rounded once to fp32: within half an fp32 ulp of it, but
for the fp64 sum's own error (T terms, ~2^-48 of their magnitudes). The case is the one the H100
nightly found at 4.3x the envelope with fp32 partial sums (a dense vector of scale ~1e3 against
unit sparse rows: 17 rows of Z, dim 32): one rounding a term of a running fp32 sum there is many
ulps of the result.
"""

import pytest
import torch

from kernels._runtime import kernel_device_type
from kernels.dlrm_interaction import dlrm_interaction


def _inputs(batch: int, features: int, dim: int, dense_scale: float):
    gen = torch.Generator().manual_seed(features * 1000 + dim)
    dense = torch.randn(batch, dim, generator=gen, dtype=torch.float64) * dense_scale
    sparse = torch.randn(batch, features, dim, generator=gen, dtype=torch.float64)
    t = features + 1
    grad = torch.randn(batch, dim + t * (t - 1) // 2, generator=gen, dtype=torch.float64)
    return dense.float(), sparse.float(), grad.float()


def _exact_gradients(dense, sparse, grad):
    """(ddense, dsparse) in fp64 from the fp32 inputs, and each element's sum of |terms|."""
    t = sparse.shape[1] + 1
    z = torch.cat([dense[:, None], sparse], dim=1).double()
    rows, cols = torch.tril_indices(t, t, -1)
    g = torch.zeros(z.shape[0], t, t, dtype=torch.float64)
    g[:, rows, cols] = grad[:, dense.shape[1]:].double()
    sym = g + g.transpose(1, 2)
    dz = sym @ z
    terms = sym.abs() @ z.abs()
    ddense = grad[:, :dense.shape[1]].double() + dz[:, 0]
    return (ddense, dz[:, 1:]), (terms[:, 0] + grad[:, :dense.shape[1]].double().abs(), terms[:, 1:])


@pytest.mark.parametrize("features,dim,dense_scale", [(16, 32, 1e3), (26, 64, 1.0), (26, 16, 1e2)])
def test_every_gradient_element_is_the_exact_value_rounded_once(features, dim, dense_scale):
    device = torch.device(kernel_device_type())
    dense, sparse, grad = _inputs(13, features, dim, dense_scale)
    leaves = [dense.to(device).requires_grad_(True), sparse.to(device).requires_grad_(True)]
    got = torch.autograd.grad(dlrm_interaction(*leaves), leaves, grad.to(device))
    exact, terms = _exact_gradients(dense, sparse, grad)
    for name, kernel, want, size in zip(("ddense", "dsparse"), got, exact, terms):
        kernel = kernel.cpu().double()
        top = torch.maximum(kernel.abs(), want.abs()).float()
        half_ulp = (torch.nextafter(top, torch.tensor(float("inf"))) - top).double() / 2
        error = (kernel - want).abs()
        bound = half_ulp + size * 2.0**-45
        worst = int(torch.argmax(error / bound))
        assert (error <= bound).all(), (
            f"{name} at flat index {worst}: {kernel.flatten()[worst].item()!r} against the exact "
            f"{want.flatten()[worst].item()!r}, {float(error.flatten()[worst] / half_ulp.flatten()[worst]):.2f} half-ulps")
