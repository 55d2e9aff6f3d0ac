"""The norms' gradient term magnitudes bound their gradients: |sum of terms| <= sum of |terms|.

A floor from these terms (``harness.numerics``) is only sound if the terms are at least the
magnitude of what they add up to; here the exact float64 gradients are checked against them.
"""

import pytest
import torch

import references.dropout_add_norm as dan
import references.layer_norm as ln
import references.rms_norm as rms


def _grads(fn, inputs: dict, grad_output):
    leaves = {k: v.clone().requires_grad_(True) for k, v in inputs.items() if v is not None}
    out = fn(**leaves)
    return dict(zip(leaves, torch.autograd.grad(out, tuple(leaves.values()), grad_output)))


def _assert_bounded(grads, terms):
    assert set(terms) == set(grads)
    for name, g in grads.items():
        slack = 1e-12 * (1 + terms[name].abs())
        assert (g.abs() <= terms[name] + slack).all(), name


@pytest.mark.parametrize("with_weight, with_bias", [(True, True), (False, True), (True, False), (False, False)])
def test_layer_norm(with_weight, with_bias):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(7, 33, generator=gen, dtype=torch.float64) * 3 + 1
    w = torch.randn(33, generator=gen, dtype=torch.float64) if with_weight else None
    b = torch.randn(33, generator=gen, dtype=torch.float64) if with_bias else None
    g = torch.randn(7, 33, generator=gen, dtype=torch.float64)
    grads = _grads(lambda x, weight=None, bias=None: ln.layer_norm(x, weight, bias, 1e-5), {"x": x, "weight": w, "bias": b}, g)
    _assert_bounded(grads, ln.gradient_term_magnitudes(x, w, b, 1e-5, g))


@pytest.mark.parametrize("offset", [0.0, 1.0])
def test_rms_norm(offset):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 40, generator=gen, dtype=torch.float64)
    w = torch.randn(40, generator=gen, dtype=torch.float64)
    g = torch.randn(5, 40, generator=gen, dtype=torch.float64)
    grads = _grads(lambda x, weight: rms.rms_norm(x, weight, 1e-6, offset), {"x": x, "weight": w}, g)
    _assert_bounded(grads, rms.gradient_term_magnitudes(x, w, 1e-6, offset, g))


@pytest.mark.parametrize("norm, prenorm", [("layer", False), ("layer", True), ("rms", False)])
def test_dropout_add_norm_with_a_replayed_mask(norm, prenorm):
    gen = torch.Generator().manual_seed(2)
    x, residual = (torch.randn(6, 24, generator=gen, dtype=torch.float64) for _ in range(2))
    bias, weight = (torch.randn(24, generator=gen, dtype=torch.float64) for _ in range(2))
    norm_bias = torch.randn(24, generator=gen, dtype=torch.float64) if norm == "layer" else None
    mask = torch.rand(6, 24, generator=gen) > 0.3
    grad_outputs = [torch.randn(6, 24, generator=gen, dtype=torch.float64) for _ in range(1 + prenorm)]
    inputs = {"x": x, "residual": residual, "bias": bias, "weight": weight, "norm_bias": norm_bias}

    def op(**kw):
        out = dan.dropout_add_norm(**kw, p=0.3, norm=norm, prenorm=prenorm, mask=mask)
        return torch.stack(out) if prenorm else out

    grads = _grads(op, inputs, torch.stack(grad_outputs) if prenorm else grad_outputs[0])
    terms = dan.gradient_term_magnitudes(x, residual, bias, weight, norm_bias, grad_outputs, p=0.3, norm=norm,
                                         eps=1e-5, prenorm=prenorm, mask=mask)
    _assert_bounded(grads, terms)
    assert (terms["x"][~mask] == 0).all(), "a dropped element's gradient has no terms: it must be exactly 0"
