"""dlrm_interaction's fp32 kernels take every code path the backends' launches take, on the
kernels' device.

On a GPU the fp32 kernels run one sample a program, a 2-D product per sample (``_split_gram`` and
``_split_product`` reshape the batch of one away); under the interpreter they run two samples a
program, a batched product. Each backend's own launch would leave the other path untested there,
so both are forced here: the forward unrolled (dim 16) and looped (dim 40: past the column tiles
the interpreter unrolls), the backward with one and two tiles of 16 rows of Z (9 and 20 features:
the interpreter loops over two) and one and three column tiles. Each must match the float64
interaction or its gradients within a few units of eps times the sum of |terms| (the spec's
envelope floor; the H100 measured the forward at 0.3-1.4 such units and the backward at up to
2.75, results/2026-11-24-h100-9, call 3).
"""

import pytest
import torch

import kernels.dlrm_interaction as dlrm
from kernels._runtime import kernel_device_type
from references.dlrm_interaction import dlrm_interaction as reference, term_magnitudes
from tests.unit.test_dlrm_backward_error import _exact_gradients

EPS32 = torch.finfo(torch.float32).eps


@pytest.mark.parametrize("dim", [16, 40])
@pytest.mark.parametrize("block_b", [1, 2])
def test_one_sample_and_batched_programs_match_the_exact_interaction(block_b, dim):
    batch, features = 5, 9
    gen = torch.Generator().manual_seed(dim)
    dense = torch.randn(batch, dim, generator=gen)
    sparse = torch.randn(batch, features, dim, generator=gen)
    _, block_t, block_d, warps = dlrm._tiling(features, dim, torch.float32, "forward")
    device = torch.device(kernel_device_type())
    got = dlrm._forward(dense.to(device), sparse.to(device), launch=(block_b, block_t, block_d, warps)).cpu()
    exact = reference(dense.double(), sparse.double())
    units = (got.double() - exact).abs() / (EPS32 * term_magnitudes(dense.double(), sparse.double()))
    assert units.max() <= 4.0, f"{units.max():.2f} units of eps * sum |terms| off (at {divmod(int(units.argmax()), got.shape[1])})"


@pytest.mark.parametrize("dim", [16, 40])
@pytest.mark.parametrize("features", [9, 20])
@pytest.mark.parametrize("block_b", [1, 2])
def test_one_sample_and_batched_backward_programs_match_the_exact_gradients(block_b, features, dim):
    batch = 5
    gen = torch.Generator().manual_seed(features * 100 + dim)
    dense = torch.randn(batch, dim, generator=gen)
    sparse = torch.randn(batch, features, dim, generator=gen)
    t = features + 1
    grad = torch.randn(batch, dim + t * (t - 1) // 2, generator=gen)
    _, block_t, block_d, warps = dlrm._tiling(features, dim, torch.float32, "backward")
    device = torch.device(kernel_device_type())
    got = dlrm._backward(dense.to(device), sparse.to(device), grad.to(device), launch=(block_b, block_t, block_d, warps))
    exact, terms = _exact_gradients(dense, sparse, grad)
    for name, kernel, want, size in zip(("dense", "sparse"), got, exact, terms):
        units = (kernel.cpu().double() - want).abs() / (EPS32 * size)
        assert units.max() <= 4.0, f"grad {name}: {units.max():.2f} units of eps * sum |terms| off"
