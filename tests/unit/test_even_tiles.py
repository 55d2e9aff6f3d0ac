"""The norms' and softmax's forwards on even tiles (every tile full: ``_rows.even_tiles``) mask
nothing, and give the bits the masked kernels give.

A batch of whole row tiles with rows exactly one block wide launches the forward with constant
masks, which Triton folds away. The same rows inside a batch one row longer (its last tile partial)
take the masked kernel; each row's arithmetic is the same, so every output the forward writes (the
normalised rows, dropout-add-norm's sum and keep-mask, and the statistics) must match bit for bit,
for each kind of norm, on the kernels' device.
"""

import pytest
import torch

import kernels._norm as norm
import kernels._norm_tiling as tiling
import kernels.softmax as softmax
from kernels import _rows
from kernels._runtime import kernel_device_type

_KINDS = {  # forward's keyword arguments besides the inputs
    "layer_norm": dict(rms=False),
    "rms_norm": dict(rms=True, w_offset=1.0),
    "dropout_add_norm": dict(rms=False, dropout=norm.Dropout.of(0.25, 7), store_sum=True, store_mask=True),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("kind", list(_KINDS))
def test_even_tiles_give_the_masked_kernels_bits(kind, dtype, monkeypatch):
    n = min(tiling._fwd_limits().max_block, 256)  # one block a row, several rows a tile
    dropout = kind == "dropout_add_norm"
    tile = tiling._tile(n, dtype, backward=False, dropout=dropout)
    rows = 2 * tile.rows
    gen = torch.Generator().manual_seed(n)
    device = kernel_device_type()
    x, r = (torch.randn(rows + 1, n, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    w, b = (torch.randn(n, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    launched = []
    even_tiles = norm.even_tiles
    monkeypatch.setattr(norm, "even_tiles", lambda *args: launched.append(even_tiles(*args)) or launched[-1])

    def forward(count):
        extra = dict(residual=r[:count], xbias=b) if dropout else {}
        return norm.forward(x[:count], w, b, eps=1e-5, **_KINDS[kind], **extra)

    even, masked = forward(rows), forward(rows + 1)
    assert launched == [True, False], f"the forward launched EVEN={launched} (tile {tile})"
    assert torch.equal(even.y, masked.y[:rows])
    assert torch.equal(even.stats, masked.stats[:, :rows])
    if dropout:
        assert torch.equal(even.s, masked.s[:rows]) and torch.equal(even.mask, masked.mask[:rows])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_softmax_even_tiles_give_the_masked_kernels_bits(dtype, monkeypatch):
    n = 16  # one block a row, several rows a tile on either backend
    tile, _ = softmax._config(n, dtype, False)
    rows = 2 * tile.rows
    gen = torch.Generator().manual_seed(n)
    x = (4 * torch.randn(rows + 1, n, generator=gen)).to(device=kernel_device_type(), dtype=dtype)
    launched = []
    even_tiles = _rows.even_tiles
    monkeypatch.setattr(_rows, "even_tiles", lambda *args: launched.append(even_tiles(*args)) or launched[-1])
    even, masked = softmax.softmax(x[:rows]), softmax.softmax(x)
    assert launched == [True, False], f"the forward launched EVEN={launched} (tile {tile})"
    assert torch.equal(even, masked[:rows])
