"""add_mul_act's relu saves its slope as packed bits (kernels/add_mul_act.py): bit j of byte k of
a row is ``z > 0`` at column 8k + j (NaN counts as positive, as torch's threshold_backward), rows
of ceil(N / 8) bytes, rows narrower than a byte and tiles narrower than 8 columns included; the
backward that reads them gives the gradients of relu(x + alpha * y + bias). On the kernels'
device."""

from __future__ import annotations

import pytest
import torch

from kernels import add_mul_act as op
from kernels._runtime import kernel_device_type


def _expected_bits(z: torch.Tensor) -> torch.Tensor:
    rows = z.reshape(-1, z.shape[-1])
    n = rows.shape[1]
    padded = torch.zeros(rows.shape[0], (n + 7) // 8 * 8, dtype=torch.int32)
    padded[:, :n] = ~(rows <= 0)
    return (padded.reshape(rows.shape[0], -1, 8) << torch.arange(8)).sum(-1).to(torch.uint8)


@pytest.mark.parametrize("shape", [(3, 1), (5, 3), (4, 8), (7, 13), (2, 3, 64), (9, 65), (2, 130)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_relu_s_saved_bits_are_its_slope_packed_eight_columns_a_byte(shape, dtype):
    gen = torch.Generator().manual_seed(0)
    device = kernel_device_type()
    x, y = (torch.randn(shape, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    bias = torch.randn(shape[-1], generator=gen).to(device=device, dtype=dtype)
    x.view(-1)[0] = float("nan")
    out, bits = op._forward(x, y, bias, 0.5, "relu", bits=True)
    torch.testing.assert_close(out, op._forward(x, y, bias, 0.5, "relu"), rtol=0, atol=0, equal_nan=True,
                               msg="storing the bits changed the output")
    z = x.double() + 0.5 * y.double() + bias.double()
    assert bits.shape == op._bits_shape(x) and torch.equal(bits.cpu(), _expected_bits(z.cpu()))


@pytest.mark.parametrize("shape", [(5, 3), (7, 13), (9, 65)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_gradients_read_from_the_bits_are_those_recomputed_from_z(shape, dtype):
    gen = torch.Generator().manual_seed(1)
    device = kernel_device_type()
    x, y, grad = (torch.randn(shape, generator=gen).to(device=device, dtype=dtype) for _ in range(3))
    bias = torch.randn(shape[-1], generator=gen).to(device=device, dtype=dtype)
    _, bits = op._forward(x, y, bias, -1.5, "relu", bits=True)
    like = x.new_empty(()).expand(x.shape)  # what the autograd function passes: no x
    from_bits = op._bits_backward(bits, like, -1.5, grad, need_bias=True)
    recomputed = op._backward(x, y, bias, -1.5, "relu", grad)
    for ours, want in zip(from_bits, recomputed):
        assert ours.dtype == dtype and ours.is_contiguous()
        torch.testing.assert_close(ours, want, rtol=0, atol=0)
    z = (x.double() + -1.5 * y.double() + bias.double()) > 0
    torch.testing.assert_close(from_bits[0], (grad.float() * z).to(dtype), rtol=0, atol=0)


def test_relu_saves_only_the_bits_so_its_inputs_may_change_before_the_backward():
    """x, y and bias are not saved: changing them in place after the forward neither raises (as a
    saved tensor's version check would) nor moves the gradients."""
    gen = torch.Generator().manual_seed(2)
    device = kernel_device_type()
    x, y = (torch.randn(6, 20, generator=gen).to(device).requires_grad_() for _ in range(2))
    bias = torch.randn(20, generator=gen).to(device).requires_grad_()
    grad = torch.randn(6, 20, generator=gen).to(device)
    want = torch.autograd.grad(op.add_mul_act(x, y, bias, 0.5, "relu"), (x, y, bias), grad)
    out = op.add_mul_act(x, y, bias, 0.5, "relu")
    with torch.no_grad():
        for t in (x, y, bias):
            t.mul_(-1.0)
    for got, expected in zip(torch.autograd.grad(out, (x, y, bias), grad), want):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
