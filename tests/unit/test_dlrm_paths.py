"""dlrm_interaction's fp32 forward takes every code path the backends' launches take, on the
kernels' device.

On a GPU the fp32 forward runs one sample a program, a 2-D product per sample (``_split_gram``
reshapes the batch of one away); under the interpreter it runs two samples a program, a batched
product. Each backend's own launch would leave the other path untested there, so both are forced
here, unrolled (dim 16) and looped (dim 40: past the column tiles the interpreter unrolls), and
each must match the float64 interaction within a few units of eps times the sum of |terms| (the
spec's envelope floor; the H100 measured the split forward at 0.7-1.3 such units).
"""

import pytest
import torch

import kernels.dlrm_interaction as dlrm
from kernels._runtime import kernel_device_type
from references.dlrm_interaction import dlrm_interaction as reference, term_magnitudes

EPS32 = torch.finfo(torch.float32).eps


@pytest.mark.parametrize("dim", [16, 40])
@pytest.mark.parametrize("block_b", [1, 2])
def test_one_sample_and_batched_programs_match_the_exact_interaction(block_b, dim):
    batch, features = 5, 9
    gen = torch.Generator().manual_seed(dim)
    dense = torch.randn(batch, dim, generator=gen)
    sparse = torch.randn(batch, features, dim, generator=gen)
    _, block_t, block_d, warps = dlrm._launch(features, dim, torch.float32, "forward")
    device = torch.device(kernel_device_type())
    got = dlrm._forward(dense.to(device), sparse.to(device), launch=(block_b, block_t, block_d, warps)).cpu()
    exact = reference(dense.double(), sparse.double())
    units = (got.double() - exact).abs() / (EPS32 * term_magnitudes(dense.double(), sparse.double()))
    assert units.max() <= 4.0, f"{units.max():.2f} units of eps * sum |terms| off (at {divmod(int(units.argmax()), got.shape[1])})"
