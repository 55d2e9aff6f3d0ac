"""Kernel launches (flash_attention's) give size-1 dimensions the stride a contiguous tensor would have.

PyTorch often gives a size-1 dimension stride 1 (a permuted (32, 1, 1, 1) tensor is (1, 1, 1, 32)
with strides (1, 1, 1, 1)); Triton specialises a stride of 1 as a constant, and Triton 3.6
miscompiled attention's backward for such a v on the H100 (an out-of-bounds shared read that
compute-sanitizer located). Only index 0 of a size-1 dimension is ever read, so the canonical
stride changes no address the kernels use.
"""

import itertools

import torch

from kernels._rows import launch_strides as _strides


def test_size_one_dimensions_get_the_contiguous_stride_and_the_others_keep_theirs():
    degenerate = torch.empty(32, 1, 1, 1).permute(3, 1, 2, 0)
    assert degenerate.stride() == (1, 1, 1, 1)
    assert _strides(degenerate) == (32, 32, 32, 1)
    transposed = torch.empty(2, 1, 5, 16).transpose(1, 2)  # (2, 5, 1, 16), strides (80, 16, 80, 1)
    assert _strides(transposed) == (80, 16, 16, 1)
    strided = torch.empty(3, 4, 6, 64)[:, :, ::2, ::2]  # no size-1 dimension: unchanged
    assert _strides(strided) == strided.stride()


def test_canonical_strides_address_the_same_elements():
    for t in (torch.empty(2, 1, 5, 16).transpose(1, 2), torch.empty(32, 1, 1, 1).permute(3, 1, 2, 0),
              torch.empty(1, 3, 1, 16)):
        launch = _strides(t)
        for index in itertools.product(*(range(n) for n in t.shape)):
            assert sum(i * s for i, s in zip(index, launch)) == sum(i * s for i, s in zip(index, t.stride()))


def test_attention_operands_get_a_unit_head_dim_stride_and_only_those_are_copied():
    """A head_dim stride of 0 (a broadcast operand) made Triton 3.6 read shared memory out of
    bounds in attention's backward; the launchers copy such operands, and no others."""
    from kernels.flash_attention import _unit_inner

    dense = torch.randn(2, 3, 5, 16)
    assert _unit_inner(dense) is dense
    sliced = torch.randn(2, 3, 9, 16)[:, :, ::2]  # strided rows, unit inner stride: kept as is
    assert _unit_inner(sliced) is sliced
    for odd in (torch.randn(2, 3, 5, 1).expand(2, 3, 5, 16), torch.randn(2, 3, 5, 48)[..., ::3]):
        copied = _unit_inner(odd)
        assert copied.stride(-1) == 1 and torch.equal(copied, odd)


def test_attention_launches_see_unit_head_dim_strides(monkeypatch):
    """Every attention launch gets operands of head_dim stride 1, whatever the caller passed (the
    kernels are replaced by spies that record their arguments: nothing runs)."""
    import kernels.flash_attention as fa

    seen = {}

    class Spy:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.__setitem__(self.name, args)

    for name in ("_attn_fwd_kernel", "_bwd_delta_kernel", "_attn_bwd_kernel"):
        monkeypatch.setattr(fa, name, Spy(name))
    broadcast = torch.randn(1, 2, 5, 1).expand(1, 2, 5, 16)  # head_dim stride 0
    strided = torch.randn(1, 2, 5, 48)[..., ::3]  # head_dim stride 3
    out, _, m, l = fa._forward(broadcast, strided, broadcast, False, 0.25, save_stats=True)
    assert seen["_attn_fwd_kernel"][10:22][3::4] == (1, 1, 1)  # q, k, v strides follow 10 pointers
    fa._backward(broadcast, strided, broadcast, out, m, l, broadcast, None, False, 0.25)
    assert seen["_bwd_delta_kernel"][4:8][3] == 1  # dout's strides follow 4 pointers
    assert seen["_attn_bwd_kernel"][18:34][3::4] == (1, 1, 1, 1)  # q, k, v, dout after 18 pointers
