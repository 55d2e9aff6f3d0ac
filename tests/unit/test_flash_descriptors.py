"""flash_attention reads q, k, v and dO through tensor descriptors where the layout allows
(``kernels.flash_attention._tma``: the native path, and the Python path under the interpreter) and
through pointers elsewhere: the two must give the same bits, forward and backward, and a layout
the copy engine cannot read must take the pointers. On the CPU the interpreter emulates the
descriptors; on a GPU they need Hopper or newer."""

from __future__ import annotations

import pytest
import torch

from harness.validate import kernel_device_type
from kernels import flash_attention as fa


def _operands(heads, kv_heads, seq, head_dim, dtype, device, gen):
    q, dout = (torch.randn(2, heads, seq, head_dim, generator=gen).to(dtype).to(device) for _ in range(2))
    k, v = (torch.randn(2, kv_heads, seq, head_dim, generator=gen).to(dtype).to(device) for _ in range(2))
    return q, k, v, dout


def _forward_backward(q, k, v, dout, causal, tma):
    out, lse, m, l = fa._forward(q, k, v, causal, 0.3, save_stats=True, tma=tma)
    return (out, lse, m, l) + tuple(fa._backward(q, k, v, out, m, l, dout, None, causal, 0.3, tma=tma))


# (q heads, k/v heads, seq, head_dim): sequences that end inside a block of every tile, grouped
# heads (a group summed in one program, and in chunks) and multi-query attention
_SIZES = ((2, 2, 77, 32), (4, 2, 45, 16), (4, 1, 33, 64)) if kernel_device_type() == "cpu" else (
    (4, 4, 1100, 64), (8, 2, 700, 128), (32, 1, 300, 64))


@pytest.mark.parametrize("size", _SIZES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_descriptor_and_pointer_loads_give_the_same_bits(size, causal, dtype):
    device = torch.device(kernel_device_type())
    q, k, v, dout = _operands(*size, dtype, device, torch.Generator().manual_seed(3))
    if not fa._tma(q, k, v, dout):
        pytest.skip(f"{device} has no tensor descriptors (they need Hopper or newer): every layout takes the pointers")
    through_descriptors = _forward_backward(q, k, v, dout, causal, True)
    through_pointers = _forward_backward(q, k, v, dout, causal, False)
    names = ("out", "lse", "m", "l", "dq", "dk", "dv")
    for name, a, b in zip(names, through_descriptors, through_pointers):
        assert torch.equal(a, b), f"{name} differs between descriptor and pointer loads"


def _with_row_stride(t: torch.Tensor, row: int) -> torch.Tensor:
    """t's values in a layout whose seq stride is ``row`` elements (>= head_dim)."""
    batch, heads, seq, head_dim = t.shape
    wide = t.new_zeros(batch, heads, seq, row)
    wide[..., :head_dim] = t
    return wide[..., :head_dim]


def test_a_layout_the_copy_engine_cannot_read_takes_the_pointers_with_the_same_bits():
    device = torch.device(kernel_device_type())
    q, k, v, dout = _operands(2, 2, 50, 16, torch.float16, device, torch.Generator().manual_seed(4))
    if not fa._tma(q, k, v):
        pytest.skip(f"{device} has no tensor descriptors (they need Hopper or newer): every layout takes the pointers")
    odd = _with_row_stride(k, 20)  # rows 40 bytes apart: not a multiple of 16
    offset = torch.empty(q.numel() + 8, dtype=q.dtype, device=device)[1:1 + q.numel()].view(q.shape)
    offset.copy_(q)  # 2 bytes past a 16-byte boundary
    assert not fa._tma(q, odd, v) and not fa._tma(offset, k, v)
    assert fa._tma(q, _with_row_stride(k, 24), v)  # 48 bytes: readable
    for causal in (False, True):
        expected = _forward_backward(q, k, v, dout, causal, True)
        for got in (_forward_backward(q, odd, v, dout, causal, fa._tma(q, odd, v)),
                    _forward_backward(offset, k, v, dout, causal, fa._tma(offset, k, v))):
            for name, a, b in zip(("out", "lse", "m", "l", "dq", "dk", "dv"), got, expected):
                assert torch.equal(a, b), f"{name}, causal={causal}"


def test_a_gradient_the_copy_engine_cannot_read_is_copied_and_gives_the_same_bits(monkeypatch):
    # The interpreter's descriptors read a stride of 0 as the GPU's copy engine cannot: the spy
    # checks that every tensor given a descriptor is one the copy engine can read.
    device = torch.device(kernel_device_type())
    q, k, v, dout = _operands(2, 2, 40, 32, torch.bfloat16, device, torch.Generator().manual_seed(6))
    if not fa._tma(q, k, v):
        pytest.skip(f"{device} has no tensor descriptors (they need Hopper or newer): every layout takes the pointers")
    broadcast = dout[:, :, :1].expand_as(dout)  # a seq stride of 0
    misaligned = torch.empty(dout.numel() + 8, dtype=dout.dtype, device=device)[1:1 + dout.numel()].view(dout.shape)
    misaligned.copy_(dout)  # contiguous, 2 bytes past a 16-byte boundary
    out, lse, m, l = fa._forward(q, k, v, True, 0.3, save_stats=True, tma=True)
    described = []
    monkeypatch.setattr(fa, "_descriptor", lambda t, rows, _make=fa._descriptor: described.append(t) or _make(t, rows))
    for grad in (broadcast, misaligned):
        assert not fa._tma(grad)
        described.clear()
        got = fa._backward(q, k, v, out, m, l, grad, None, True, 0.3, tma=True)
        assert len(described) == 8 and all(fa._tma(t) for t in described)
        expected = fa._backward(q, k, v, out, m, l, grad.clone(memory_format=torch.contiguous_format), None, True,
                                0.3, tma=True)
        for name, a, b in zip(("dq", "dk", "dv"), got, expected):
            assert torch.equal(a, b), name
