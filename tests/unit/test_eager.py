"""The CPU's eager as the GPU's computes it (harness.eager): the budget is no looser on the CPU."""

import contextlib

import pytest
import torch
import torch.nn.functional as F

from harness.eager import gpu_like
from harness.numerics import Budget, Compared, compare

ROWS, COLS, GROUP = 512, 64, 8


def _dweight(x, w, b, g, dtype, emulate):
    leaves = [t.to(dtype).requires_grad_() for t in (x, w, b)]
    with gpu_like("cpu") if emulate else contextlib.nullcontext():
        y = F.layer_norm(leaves[0], (COLS,), leaves[1], leaves[2])
        return torch.autograd.grad(y, leaves, g.to(dtype))[1]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [torch.float16])  # the dtype the fault was found in
def test_a_weight_gradient_with_16_bit_partial_sums_fails_against_gpu_like_eager_and_passes_plain_cpu_eager(dtype, seed):
    """The case that hid a real fault: the CPU's 16-bit LayerNorm backward sums dweight in 16 bits,
    so its own error covers a kernel that stores its per-group partial sums in 16 bits (the H100
    fails that kernel, against an eager that sums in fp32). Calibrated on GPU-like eager the CPU
    fails it too, and still passes the kernel that keeps its partial sums in fp32."""
    gen = torch.Generator().manual_seed(seed)
    x, g = (torch.randn(ROWS, COLS, generator=gen).to(dtype) for _ in range(2))
    w, b = (torch.randn(COLS, generator=gen).to(dtype) for _ in range(2))
    oracle = _dweight(x, w, b, g, torch.float64, emulate=False)
    xd = x.double()
    xhat = (xd - xd.mean(1, keepdim=True)) / (xd.var(1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    terms = (g.double() * xhat).float().view(-1, GROUP, COLS).sum(1)  # one partial row per group of rows

    def kernel(partial_dtype):
        return terms.to(partial_dtype).float().sum(0).to(dtype)

    plain = _dweight(x, w, b, g, dtype, emulate=False)
    like_gpu = _dweight(x, w, b, g, dtype, emulate=True)
    assert compare(Budget(2.0), Compared("dweight", kernel(dtype), plain, oracle)).passed  # what the CPU budget used to allow
    assert not compare(Budget(2.0), Compared("dweight", kernel(dtype), like_gpu, oracle)).passed
    assert compare(Budget(2.0), Compared("dweight", kernel(torch.float32), like_gpu, oracle)).passed


def test_gpu_like_eager_keeps_views_writes_dtypes_and_leaves_wide_dtypes_alone():
    x = torch.randn(4, 8).half()
    with gpu_like("cpu"):
        view = x.view(-1)
        assert view.data_ptr() == x.data_ptr()  # a view is still a view
        y = x.clone()
        y.add_(1)  # a write still lands in the tensor written
        soft = torch.softmax(x, -1)  # its backward names its input dtype: widened with the tensors
        grad = torch._softmax_backward_data(torch.ones_like(soft), soft, -1, torch.float16)
        stats = torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5)
        wide = torch.randn(4, 8, dtype=torch.float64)
        exact = wide @ wide.T
    assert torch.equal(y, x + 1)
    assert soft.dtype == grad.dtype == torch.float16
    # the statistics in the dtype the GPU returns them in (its meta kernel's): fp32, not the CPU's fp16
    assert [t.dtype for t in stats] == [torch.float16, torch.float32, torch.float32]
    assert torch.equal(exact, wide @ wide.T)  # fp64 (the oracle) runs as it is


def test_a_16_bit_sum_is_rounded_once_as_a_gpu_rounds_it():
    x = torch.full((4096,), 1.0, dtype=torch.float16) + torch.rand(4096).half() * 1e-3
    with gpu_like("cpu"):
        got = x.sum()
    assert got.dtype == torch.float16 and got == x.float().sum().half()


def _gated(a, b):
    return torch.exp(a) * b


def test_a_flushed_subnormal_intermediate_passes_at_the_rows_scale_and_a_wrong_value_still_fails():
    """exp(-95) is a subnormal in fp32 (5.5e-42): a GPU kernel that flushes it gives 0 where
    eager gives 5.5e-36 after the product (as in an H200 nightly case, glu bf16: 0 against 2e-37).
    The reference run with subnormals flushed shows the difference is the flush's, at that row's
    scale."""
    from harness.eager import subnormals_flushed

    a = torch.tensor([[-95.0, 0.5, 1.0, -0.3]])
    b = torch.tensor([[1e6, 2.0, -1.0, 3.0]])
    oracle = _gated(a.double(), b.double())
    eager = _gated(a, b)
    with subnormals_flushed():
        flushed = _gated(a, b)
    assert eager[0, 0] != 0 and flushed[0, 0] == 0 and torch.equal(flushed[0, 1:], eager[0, 1:])
    kernel = eager.clone()
    kernel[0, 0] = 0.0
    assert not compare(Budget(2.0), Compared("out", kernel, eager, oracle)).passed  # held to eager's error: fails
    assert compare(Budget(2.0), Compared("out", kernel, eager, oracle, flushed=flushed)).passed
    wrong = kernel.clone()
    wrong[0, 2] = wrong[0, 2] * (1 + 8 * torch.finfo(torch.float32).eps)
    assert not compare(Budget(2.0), Compared("out", wrong, eager, oracle, flushed=flushed)).passed


def test_a_flush_in_a_row_does_not_loosen_its_other_elements():
    """The flushed element of a row with a huge factor is 1.7e-3 off; a 0.08% error at an ordinary
    element of the same row must still fail (the flush is admitted element by element)."""
    from harness.eager import subnormals_flushed

    a = torch.tensor([[-95.0, 0.5, 1.0, -0.3]])
    b = torch.tensor([[3e38, 2.0, -1.0, 3.0]])
    oracle = _gated(a.double(), b.double())
    eager = _gated(a, b)
    with subnormals_flushed():
        flushed = _gated(a, b)
    kernel = flushed.clone()
    assert compare(Budget(2.0), Compared("out", kernel, eager, oracle, flushed=flushed)).passed
    kernel[0, 1] = kernel[0, 1] * 1.0008
    assert not compare(Budget(2.0), Compared("out", kernel, eager, oracle, flushed=flushed)).passed
