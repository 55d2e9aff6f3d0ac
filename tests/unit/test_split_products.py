"""The exact-product fp32 tile products (``kernels._matmul.split_dot`` and ``split_gram``), on the
kernels' device.

``split_pieces`` must cut every fp32 value into three pieces that add back to it exactly, each
exact in the piece type (TF32 or bf16), and the products must keep every cross product of the
pieces that matters (``split_gram`` half of them through the transpose of its tail). A tile
product sums many products, and its fp32 rounding would hide a missing cross term, so the product
tests give each output at most one nonzero term, with a small nonzero starting tail: ``a @ b`` with
a's row i and b's column j meeting in one column; ``a @ a^T`` with rows 2m and 2m + 1 of ``a``
sharing one nonzero column (the diagonal and the elements (2m, 2m + 1), (2m + 1, 2m) have one term,
the rest none). head must then be the product of the heads exactly, and head + tail (split_gram:
+ tail^T) the start and the product within twice the terms left out (below 2^-29 of the product
for TF32 pieces, 2^-28 for bf16) and the tail's own rounding (it holds the start and the cross
products, 2^-6 of the product at most). A missing cross term, or one of split_gram's not halved
where its transpose doubles it, is up to 2^-14 (bf16 mid * mid) or 2^-21 (its mid * lo, TF32's
hi * lo) of the product, past that bound at some of the outputs with a term.
"""

import math

import pytest
import torch
import triton
import triton.language as tl

from kernels._matmul import split_dot, split_gram, split_pieces
from kernels._runtime import kernel_device_type

PIECES = ("tf32", "bf16")
LOW_BITS = {"tf32": (1 << 13) - 1, "bf16": (1 << 16) - 1}  # the significand bits each piece type drops
# how far below each product the terms the split products leave out lie (TF32: mid * lo, lo * mid and
# lo * lo; bf16: lo * lo)
LEFT_OUT = {"tf32": 2.0**-29, "bf16": 2.0**-28}


@triton.jit
def _split_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, PIECE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    hi, mid, lo = split_pieces(x, PIECE)
    tl.store(out_ptr + offs, hi, mask=offs < n)
    tl.store(out_ptr + n + offs, mid, mask=offs < n)
    tl.store(out_ptr + 2 * n + offs, lo, mask=offs < n)


@triton.jit
def _dot_kernel(a_ptr, b_ptr, tail_ptr, out_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                PIECE: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + rm * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn)
    head, tail = split_dot(a, b, tl.load(tail_ptr + rm * N + rn), PIECE)
    tl.store(out_ptr + rm * N + rn, head)
    tl.store(out_ptr + M * N + rm * N + rn, tail)


def _split_dot(a: torch.Tensor, b: torch.Tensor, tail: torch.Tensor, piece: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(head, tail) of split_dot(a, b, tail) for 16 x 16 fp32 tiles on the kernels' device, back on
    the CPU."""
    device = _device()
    out = torch.empty((2, *tail.shape), dtype=torch.float32, device=device)
    _dot_kernel[(1,)](a.to(device), b.to(device), tail.to(device), out, M=a.shape[0], K=a.shape[1],
                      N=b.shape[1], PIECE=piece)
    return tuple(out.cpu())


@triton.jit
def _gram_kernel(a_ptr, tail_ptr, out_ptr, M: tl.constexpr, K: tl.constexpr, PIECE: tl.constexpr):
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    a_t = tl.load(a_ptr + rk[:, None] + rm[None, :] * K)
    head, tail = split_gram(a, a_t, tl.load(tail_ptr + rm[:, None] * M + rm[None, :]), PIECE)
    tl.store(out_ptr + rm[:, None] * M + rm[None, :], head)
    tl.store(out_ptr + M * M + rm[:, None] * M + rm[None, :], tail)


def _split_gram(a: torch.Tensor, tail: torch.Tensor, piece: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(head, tail) of split_gram(a, a^T, tail) for a 16 x 16 fp32 tile on the kernels' device,
    back on the CPU."""
    device = _device()
    out = torch.empty((2, *tail.shape), dtype=torch.float32, device=device)
    _gram_kernel[(1,)](a.to(device), tail.to(device), out, M=a.shape[0], K=a.shape[1], PIECE=piece)
    return tuple(out.cpu())


def _device():
    return torch.device(kernel_device_type())


def _values() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    normal = torch.randn(200, generator=gen) * torch.logspace(-30, 30, 200)
    special = torch.tensor([0.0, -0.0, 1.0, -1.0, 3.4028234663852886e38, -3.4028234663852886e38,
                            2.0**-126, -(2.0**-110) * (1 + 2.0**-23), 1.0 + 2.0**-23, -(2.0 - 2.0**-22)])
    return torch.cat([normal, special]).to(torch.float32)


def _split(x: torch.Tensor, piece: str) -> torch.Tensor:
    out = torch.empty(3 * x.numel(), dtype=torch.float32, device=x.device)
    _split_kernel[(1,)](x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()), PIECE=piece)
    return out.view(3, -1).cpu()


@pytest.mark.parametrize("piece", PIECES)
def test_the_pieces_are_exact_in_their_type_and_add_back_to_the_value(piece):
    x = _values()
    hi, mid, lo = _split(x.to(_device()), piece)
    for name, part in (("hi", hi), ("mid", mid), ("lo", lo)):
        bits = part.view(torch.int32) & LOW_BITS[piece]
        assert not bits.any(), f"{name} keeps bits {piece} drops, at x = {x[bits != 0][:4].tolist()}"
    total = hi.double() + mid.double() + lo.double()
    wrong = total != x.double()
    assert not wrong.any(), f"hi + mid + lo != x at {x[wrong][:4].tolist()}"
    kept = {"tf32": 10, "bf16": 7}[piece]  # significand bits after the leading one
    assert (mid.abs() <= x.abs() * 2.0**-kept).all() and (lo.abs() <= x.abs() * 2.0**(-2 * kept)).all()


@pytest.mark.parametrize("piece", PIECES)
def test_infinities_are_their_own_head_and_nans_stay_nan(piece):
    x = torch.tensor([math.inf, -math.inf, math.nan], dtype=torch.float32)
    hi, mid, lo = _split(x.to(_device()), piece)
    assert hi[:2].tolist() == [math.inf, -math.inf] and mid[:2].tolist() == [0.0, 0.0] and lo[:2].tolist() == [0.0, 0.0]
    assert hi[2].isnan() and mid[2].isnan() and lo[2].isnan()


@pytest.mark.parametrize("piece", PIECES)
@pytest.mark.parametrize("scale", [1.0, 1e-10, 1e15])  # products (scale^2) in fp32's normal range
def test_each_product_of_split_gram_is_all_there(scale, piece):
    m = k = 16
    gen = torch.Generator().manual_seed(1)
    a = torch.zeros(m, k)
    a[torch.arange(m), torch.arange(m) // 2] = torch.randn(m, generator=gen) * scale
    exact = a.double() @ a.double().T
    assert (exact != 0).sum() == 2 * m, "the test's a gives each output of a a^T more than one term"
    start = (exact * torch.randn(m, m, generator=gen).double() * 2.0**-12).float()
    head, tail = _split_gram(a, start, piece)
    assert torch.equal(head.double(), _head(a, piece) @ _head(a, piece).T), "head is not hi(a) @ hi(a)^T, exactly"
    got = head.double() + tail.double() + tail.double().T
    want = start.double() + start.double().T + exact
    bound = exact.abs() * 2 * LEFT_OUT[piece] + (start.double().abs() + start.double().abs().T + exact.abs() * 2.0**-6) * 2.0**-22
    error = (got - want).abs()
    worst = int(torch.argmax(error / bound))
    assert (error <= bound).all(), (
        f"head + tail + tail^T is {float(error.flatten()[worst] / exact.abs().flatten()[worst]):.3g} of the product "
        f"off at {divmod(worst, m)} (within {float(bound.flatten()[worst] / exact.abs().flatten()[worst]):.3g} expected)")


def _head(t: torch.Tensor, piece: str) -> torch.Tensor:
    """t's head in fp64 (the significand bits the piece type drops cleared)."""
    return (t.view(torch.int32) & ~LOW_BITS[piece]).view(torch.float32).double()


@pytest.mark.parametrize("piece", PIECES)
def test_infinities_in_split_gram_give_what_eager_gives(piece):
    """An infinite element times a value whose mid and lo are 0 (exact in the piece type): the
    cross products must not turn inf * 0 into NaN; NaN only where IEEE has inf * 0 or inf - inf."""
    a = torch.zeros(16, 16)
    a[0, 0], a[1, 0], a[2, 1], a[3, 0], a[3, 1] = math.inf, -math.inf, math.nan, math.inf, math.inf
    a[4:12, 0] = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0, -0.25, 1.0, 0.0])  # exact in bf16 and TF32
    a[4:12, 1] = torch.tensor([1.0, 1.0, -1.0, 0.0, 2.0, 2.0, -4.0, 1.0])
    a[12:, 2] = torch.tensor([1.0 + 2.0**-20, 3.0, -1.0 / 3.0, 7.0])  # pieces of their own, beside the infinities
    head, tail = _split_gram(a, torch.zeros(16, 16), piece)
    got = head + tail + tail.T
    want = a @ a.T
    assert torch.equal(got.isnan(), want.isnan()), f"NaN at {got.isnan().nonzero().tolist()}, eager {want.isnan().nonzero().tolist()}"
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))


@pytest.mark.parametrize("piece", PIECES)
@pytest.mark.parametrize("scale", [1.0, 1e-20, 1e15])
def test_each_product_of_split_dot_is_all_there(scale, piece):
    m = k = n = 16
    gen = torch.Generator().manual_seed(1)
    a = torch.zeros(m, k)
    b = torch.zeros(k, n)
    # output (i, j) sums a[i, :] * b[:, j]; a's row i and b's column j meet in column i % k only
    a[torch.arange(m), torch.arange(m) % k] = torch.randn(m, generator=gen) * scale
    b[torch.arange(m) % k, :] = torch.randn(m, n, generator=gen)
    exact = a.double() @ b.double()
    start = (exact * torch.randn(m, n, generator=gen).double() * 2.0**-12).float()
    head, tail = _split_dot(a, b, start, piece)
    assert torch.equal(head.double(), _head(a, piece) @ _head(b, piece)), "head is not hi(a) @ hi(b), exactly"
    got = head.double() + tail.double()
    want = start.double() + exact
    bound = exact.abs() * 2 * LEFT_OUT[piece] + (start.double().abs() + exact.abs() * 2.0**-6) * 2.0**-22
    error = (got - want).abs()
    worst = int(torch.argmax(error / bound))
    assert (error <= bound).all(), (
        f"head + tail is {float(error.flatten()[worst] / exact.abs().flatten()[worst]):.3g} of the product "
        f"off at {divmod(worst, n)} (within {float(bound.flatten()[worst] / exact.abs().flatten()[worst]):.3g} expected)")


@pytest.mark.parametrize("piece", PIECES)
def test_infinities_in_split_dot_give_what_eager_gives(piece):
    """An infinite element times a value whose mid and lo are 0 (exact in the piece type): the
    cross products must not turn inf * 0 into NaN; NaN only where IEEE has inf * 0 or inf - inf."""
    a = torch.zeros(16, 16)
    b = torch.zeros(16, 16)
    a[0, 0], a[1, 0], a[2, 1], a[3, 0], a[3, 1] = math.inf, -math.inf, math.nan, math.inf, math.inf
    b[0, :8] = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0, -0.25, 1.0, 0.0])  # exact in bf16 and TF32
    b[1, :8] = torch.tensor([1.0, 1.0, -1.0, 0.0, 2.0, 2.0, -4.0, 1.0])
    head, tail = _split_dot(a, b, torch.zeros(16, 16), piece)
    got = head + tail
    want = a @ b
    assert torch.equal(got.isnan(), want.isnan()), f"NaN at {got.isnan().nonzero().tolist()}, eager {want.isnan().nonzero().tolist()}"
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))
