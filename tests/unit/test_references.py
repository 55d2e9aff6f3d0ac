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
