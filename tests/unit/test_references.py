"""The references are the truth: their values and their autograd derivatives are checked here
against closed forms, because a wrong reference makes a right kernel fail (or a wrong one pass)."""

import math

import pytest
import torch

from references.add_mul_act import gelu_tanh, sigmoid

# Includes 0 (where a |z|-based form has a zero autograd slope) and tails past fp64's 1 - y == 0.
POINTS = [-800.0, -60.0, -37.5, -5.0, -1.0, -1e-300, 0.0, 1e-300, 0.5, 3.0, 37.5, 60.0, 800.0]


def _exact_sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def test_sigmoid_values_and_slope_match_the_closed_form():
    z = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    y = sigmoid(z)
    y.sum().backward()
    for zi, yi, gi in zip(POINTS, y.tolist(), z.grad.tolist()):
        exact = _exact_sigmoid(zi)
        slope = exact * _exact_sigmoid(-zi)
        assert yi == pytest.approx(exact, rel=1e-15, abs=0.0), zi
        assert gi == pytest.approx(slope, rel=1e-14, abs=0.0), zi


def test_gelu_tanh_slope_matches_a_central_difference():
    z = torch.linspace(-12, 12, 481, dtype=torch.float64, requires_grad=True)
    gelu_tanh(z).sum().backward()
    h = 1e-6
    with torch.no_grad():
        numeric = (gelu_tanh(z + h) - gelu_tanh(z - h)) / (2 * h)
    torch.testing.assert_close(z.grad, numeric, rtol=1e-7, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# The shared activations (references/_activations.py) and the references built on them
# ----------------------------------------------------------------------------------------------

from torch.nn import functional as F  # noqa: E402

import references.bias_gelu as bias_gelu_ref  # noqa: E402
import references.glu as glu_ref  # noqa: E402
import references.linear_act as linear_act_ref  # noqa: E402
import references.lora_linear as lora_ref  # noqa: E402
from references._activations import ACTIVATIONS, gelu, silu  # noqa: E402

# Exact GELU's far tail: F.gelu's 0.5 z (1 + erf(z / sqrt 2)) is 0 in float64 below z = -8.3.
GELU_POINTS = [-40.0, -30.0, -12.0, -8.5, -5.0, -0.75, -1e-300, 0.0, 1e-300, 0.3, 2.0, 9.0, 40.0]


def _phi(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def test_exact_gelu_values_and_slope_match_the_closed_form_into_the_tail():
    z = torch.tensor(GELU_POINTS, dtype=torch.float64, requires_grad=True)
    y = gelu(z)
    y.sum().backward()
    for zi, yi, gi in zip(GELU_POINTS, y.tolist(), z.grad.tolist()):
        # erfc(t)'s relative condition number is ~2 t^2 = z^2 in the tail: one rounding of its
        # argument (here and in math.erfc's) becomes z^2 half-ulps
        rel = 1e-15 * (1 + zi * zi)
        assert yi == pytest.approx(zi * _cdf(zi), rel=rel, abs=0.0), zi
        slope = _cdf(zi) + zi * _phi(zi)
        # the slope cancels near gelu's minimum (z ~ -0.75): bound by the size of its terms
        assert gi == pytest.approx(slope, rel=rel, abs=rel * (abs(_cdf(zi)) + abs(zi * _phi(zi)))), zi
    assert y[1].item() < -1e-200  # z = -30: ~ -1.5e-197, where F.gelu says 0


def test_silu_values_and_slope_match_the_closed_form():
    z = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    y = silu(z)
    y.sum().backward()
    for zi, yi, gi in zip(POINTS, y.tolist(), z.grad.tolist()):
        s = _exact_sigmoid(zi)
        assert yi == pytest.approx(zi * s, rel=1e-15, abs=0.0), zi
        assert gi == pytest.approx(s + zi * s * _exact_sigmoid(-zi), rel=1e-13, abs=1e-300), zi


@pytest.mark.parametrize("name", ["relu", "sigmoid", "silu", "gelu_tanh", "gelu"])
def test_activations_agree_with_torch_where_torch_is_accurate(name):
    """Away from the tails the tail-stable forms are the torch functions themselves."""
    torch_forms = {"relu": torch.relu, "sigmoid": torch.sigmoid, "silu": F.silu, "gelu": F.gelu,
                   "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}
    z = torch.linspace(-6, 6, 1201, dtype=torch.float64, requires_grad=True)
    ours = ACTIVATIONS[name](z)
    theirs = torch_forms[name](z)
    torch.testing.assert_close(ours, theirs, rtol=1e-13, atol=1e-15)
    (g_ours,) = torch.autograd.grad(ours.sum(), z)
    (g_theirs,) = torch.autograd.grad(theirs.sum(), z)
    torch.testing.assert_close(g_ours, g_theirs, rtol=1e-12, atol=1e-14)


def test_glu_references_gate_with_the_first_half():
    torch.manual_seed(0)
    a, b = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    for act in ("silu", "gelu", "gelu_tanh"):
        packed = glu_ref.glu_packed(torch.cat([a, b], dim=-1), act)
        assert torch.equal(packed, glu_ref.glu(a, b, act))
        torch.testing.assert_close(packed, ACTIVATIONS[act](a) * b)


def test_bias_gelu_linear_act_and_lora_references_compose_as_documented():
    torch.manual_seed(1)
    x = torch.randn(4, 6, dtype=torch.float64)
    w, bias = torch.randn(5, 6, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    torch.testing.assert_close(bias_gelu_ref.bias_gelu(x[:, :5], bias), F.gelu(x[:, :5] + bias))
    torch.testing.assert_close(bias_gelu_ref.bias_gelu(x[:, :5], bias, "tanh"),
                               F.gelu(x[:, :5] + bias, approximate="tanh"))
    torch.testing.assert_close(linear_act_ref.linear_act(x, w, bias, "silu"), F.silu(x @ w.T + bias))
    a, b = torch.randn(8, 6, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    torch.testing.assert_close(lora_ref.lora_linear(x, w, a, b, 0.5), x @ w.T + 0.5 * (x @ a.T) @ b.T)


def test_dropout_add_rmsnorm_reference_is_the_formula_on_a_row_with_an_infinity(monkeypatch):
    """A row whose 16-bit sum overflowed (H100 nightly: fp16 x = -14336 kept at p = 0.9): the
    formula gives 0 at the finite entries and NaN at the infinity, forward and backward, on the
    kernels' device (ATen's CUDA RMSNorm made the whole row NaN; its CPU kernel did not, so
    ``F.rms_norm`` is made to raise, and a reference that calls it fails on any device)."""
    from kernels._runtime import kernel_device_type
    from references.dropout_add_norm import dropout_add_norm

    def refused(*args, **kwargs):
        raise AssertionError("the reference called F.rms_norm, whose CUDA kernel NaNs a row holding an infinity")

    monkeypatch.setattr(torch.nn.functional, "rms_norm", refused)

    device = kernel_device_type()
    h = torch.float16
    x = torch.tensor([[-16160.0, -11176.0, 18720.0, -12272.0, -14336.0]], dtype=h, device=device)
    residual = torch.tensor([[154.125, -29.34375, -217.875, 56.84375, -108.4375]], dtype=h, device=device)
    weight = torch.tensor([1.541, -0.2935, -2.18, 0.5684, -1.085], dtype=h, device=device, requires_grad=True)
    keep = torch.tensor([[False, False, False, False, True]], device=device)
    y = dropout_add_norm(x, residual, None, weight, None, p=0.9, norm="rms", mask=keep)
    (grad_weight,) = torch.autograd.grad(y, weight, torch.ones_like(y))
    for out in (y[0], grad_weight):
        assert torch.equal(out[:4], torch.zeros(4, dtype=h, device=device)), out
        assert out[4].isnan()
