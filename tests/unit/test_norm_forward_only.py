"""The norms' forward with no graph to record gives the same bits as with one.

With no backward to come, dropout-add-norm leaves the row statistics K, m and rstd unwritten
(``store_stats=False``; LayerNorm and RMSNorm store them all the same, docs/design-notes.md). The
output must not change: these tests run each op with and without a graph, on one-block and
streamed rows, and ask for the same bits; and they check that the statistics are written exactly
when asked, with the values a backward reads.
"""

import pytest
import torch

import kernels._norm as norm
import kernels._norm_tiling as tiling
from kernels.dropout_add_norm import dropout_add_norm
from kernels.layer_norm import layer_norm
from kernels.rms_norm import rms_norm
from kernels._runtime import kernel_device_type

_OPS = {
    "layer_norm": lambda x, w, b, r: layer_norm(x, w, b),
    "rms_norm": lambda x, w, b, r: rms_norm(x, w, weight_offset=1.0),
    "dropout_add_norm": lambda x, w, b, r: dropout_add_norm(x, r, bias=b, weight=w, p=0.25, seed=7),
}


def _inputs(cols, grad):
    gen = torch.Generator().manual_seed(cols)
    device = kernel_device_type()
    x, w, b, r = (torch.randn(shape, generator=gen).to(device=device, dtype=torch.bfloat16)
                  for shape in ((5, cols), (cols,), (cols,), (5, cols)))
    return x.requires_grad_(grad), w.requires_grad_(grad), b.requires_grad_(grad), r


# one block and streamed rows on either backend (the last: one column past the widest block)
@pytest.mark.parametrize("cols", [48, 200, tiling._fwd_limits().max_block + 1])
@pytest.mark.parametrize("op", list(_OPS))
def test_output_without_a_graph_is_the_same(op, cols):
    with_graph = _OPS[op](*_inputs(cols, grad=True))
    without = _OPS[op](*_inputs(cols, grad=False))
    assert not without.requires_grad
    assert torch.equal(with_graph.detach(), without)


def test_statistics_are_stored_only_when_asked():
    x, w, b, _ = _inputs(200, grad=False)
    assert norm.forward(x, w, b, eps=1e-5, rms=False, store_stats=False).stats is None
    stats = norm.forward(x, w, b, eps=1e-5, rms=False).stats
    mean = x.float().mean(dim=-1)
    rstd = torch.rsqrt(x.float().var(dim=-1, unbiased=False) + 1e-5)
    torch.testing.assert_close(stats[0] + stats[1], mean, rtol=1e-5, atol=1e-5)  # K + m
    torch.testing.assert_close(stats[2], rstd, rtol=1e-4, atol=1e-5)
