"""The norms' forward on even tiles (every tile full, short rows: ``even_tiles``) masks nothing,
and gives the bits the masked kernel gives.

A batch of whole row tiles with rows exactly one block wide launches the forward with constant
masks, which Triton folds away. The same rows inside a batch one row longer (its last tile partial)
take the masked kernel; each row's arithmetic is the same, so the outputs and the statistics must
match bit for bit, for each op, on the kernels' device.
"""

import pytest
import torch

import kernels._norm as norm
from kernels._runtime import kernel_device_type
from tests.unit.test_norm_forward_only import _OPS


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("op", list(_OPS))
def test_even_tiles_give_the_masked_kernels_bits(op, dtype):
    n = min(norm._fwd_limits().max_block, 256)  # one block a row, several rows a tile
    tile = norm._tile(n, dtype, backward=False, dropout=op == "dropout_add_norm")
    rows = 2 * tile.rows
    assert norm.even_tiles(rows, n, tile) and not norm.even_tiles(rows + 1, n, tile), tile
    gen = torch.Generator().manual_seed(n)
    device = kernel_device_type()
    x, r = (torch.randn(rows + 1, n, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    w, b = (torch.randn(n, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    even = _OPS[op](x[:rows], w, b, r[:rows])
    masked = _OPS[op](x, w, b, r)[:rows]
    assert torch.equal(even, masked)
