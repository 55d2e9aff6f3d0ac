"""Gradient term magnitudes bound their gradients: |sum of terms| <= sum of |terms|.

A floor from these terms (``harness.numerics``) is only sound if the terms are at least the
magnitude of what they add up to; here the exact float64 gradients are checked against them, for
the norms and for the matmul ops, and the harness is checked to hand a hook the call (fp64 inputs,
the case's dtype), and a hook of the older form (the reference's arguments by name) what it asks
for.
"""

import warnings

import pytest
import torch
from hypothesis import strategies as st

import references.dropout_add_norm as dan
import references.layer_norm as ln
import references.linear_act as la
import references.lora_linear as lora
import references.rms_norm as rms
from harness import Dim, KernelSpec, Numerics, TensorArg
from harness.case import Case, TensorRecipe
from harness.checks import gradient_term_magnitudes, prepare
from harness.layouts import Layout


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


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_linear_act(activation):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 9, 7, generator=gen, dtype=torch.float64)
    w, b = torch.randn(5, 7, generator=gen, dtype=torch.float64), torch.randn(5, generator=gen, dtype=torch.float64)
    g = torch.randn(2, 9, 5, generator=gen, dtype=torch.float64)
    grads = _grads(lambda x, weight, bias: la.linear_act(x, weight, bias, activation), {"x": x, "weight": w, "bias": b}, g)
    terms = la.gradient_term_magnitudes(x, w, b, activation, (g,), dtype=torch.float32)
    _assert_bounded(grads, terms)
    if activation == "relu":  # no curvature: the terms are those of |g| * relu'(z) through the matmuls
        slope = (torch.nn.functional.linear(x, w, b) > 0).to(torch.float64)
        torch.testing.assert_close(terms["x"], (g.abs() * slope) @ w.abs())
    # in fp32 ulps (the spec's term precision): grad_z's 16-bit rounding weighs eps16 / eps32 times more
    ratio = torch.finfo(torch.bfloat16).eps / torch.finfo(torch.float32).eps
    bf16 = la.gradient_term_magnitudes(x, w, b, activation, (g,), dtype=torch.bfloat16)
    for name in terms:
        torch.testing.assert_close(bf16[name], terms[name] * ratio)


def test_lora_linear_terms_weigh_the_rounded_low_rank_product_by_the_dtype():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(11, 6, generator=gen, dtype=torch.float64)
    w = torch.randn(8, 6, generator=gen, dtype=torch.float64)
    a, b = torch.randn(4, 6, generator=gen, dtype=torch.float64), torch.randn(8, 4, generator=gen, dtype=torch.float64)
    g = torch.randn(11, 8, generator=gen, dtype=torch.float64)
    grads = _grads(lambda x, lora_a, lora_b: lora.lora_linear(x, w, lora_a, lora_b, -1.5),
                   {"x": x, "lora_a": a, "lora_b": b}, g)
    fp32 = lora.gradient_term_magnitudes(x, w, a, b, -1.5, (g,), dtype=torch.float32)
    bf16 = lora.gradient_term_magnitudes(x, w, a, b, -1.5, (g,), dtype=torch.bfloat16)
    _assert_bounded(grads, fp32)  # a negative scale still gives non-negative terms that bound
    # grad x's low-rank path carries a rounding of g @ lora_b to the dtype: one ulp of it (in fp32
    # ulps, the spec's term precision: 2^16 of them for bf16, 1 for fp32)
    ratio = torch.finfo(torch.bfloat16).eps / torch.finfo(torch.float32).eps
    torch.testing.assert_close(bf16["x"] - fp32["x"], (ratio - 1) * 1.5 * ((g @ b).abs() @ a.abs()))
    torch.testing.assert_close(bf16["lora_a"], fp32["lora_a"])


def _spec(hook):
    """A one-tensor spec whose gradient terms hook is ``hook``."""
    return KernelSpec(name="double", reference=lambda x, alpha: x * alpha, implementations={"direct": lambda x, alpha: x * alpha},
                      tensors=(TensorArg("x", dims=("n",), grad=True),), dims={"n": Dim()},
                      scalars={"alpha": st.just(3.0)}, numerics=Numerics(gradient_term_magnitudes=hook))


def _prepared():
    case = Case(spec="double", dtype="bfloat16", dims={"n": 2},
                tensors={"x": TensorRecipe((2,), "bfloat16", Layout(), "normal", 0)}, scalars={"alpha": 3.0})
    return prepare(case, "cpu")


def test_the_harness_hands_a_gradient_hook_the_call_and_the_grad_outputs():
    seen = {}

    def hook(call, grad_outputs):
        seen.update(call=call, grad_outputs=grad_outputs)
        return {"x": call["x"].abs()}

    grads = [torch.ones(2)]
    assert set(gradient_term_magnitudes(_spec(hook), _prepared(), grads)) == {"x"}
    call = seen["call"]
    assert call.dtype is torch.bfloat16 and call["x"].dtype is torch.float64 and call["alpha"] == 3.0
    assert call.dims == {"n": 2} and call.mask is None
    assert seen["grad_outputs"][0].dtype is torch.float64
    assert gradient_term_magnitudes(_spec(None), _prepared(), grads) == {}


def test_a_hook_of_the_older_form_is_adapted_with_a_warning_and_gets_the_dtype_only_if_it_asks():
    seen = {}

    def with_dtype(x, alpha, grad_outputs, dtype):
        seen["dtype"] = dtype
        return {"x": x}

    def without(x, alpha, grad_outputs):
        seen["without"] = alpha
        return {"x": x}

    grads = [torch.ones(2)]
    for hook in (with_dtype, without):
        with pytest.warns(DeprecationWarning, match=r"spec 'double': numerics.gradient_term_magnitudes takes the "
                                                    r"reference's arguments by name"):
            spec = _spec(hook)
        assert set(gradient_term_magnitudes(spec, _prepared(), grads)) == {"x"}
    assert seen == {"dtype": torch.bfloat16, "without": 3.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        _spec(lambda call, grad_outputs: {})  # a function of the call: no warning


def _flash_grads_with_roundings(q, k, v, dout, dlse, causal, scale, rounding):
    """dQ, dK, dV in fp64 with ``rounding`` applied where a flash backward rounds: P before PV (its
    effect on D) and before P^T dO, dS before dS K and dS^T Q."""
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    dp = dout @ v.transpose(-2, -1)
    d = (rounding(p) * dp).sum(-1, keepdim=True) - dlse.unsqueeze(-1)
    ds = rounding(p * (dp - d))
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, rounding(p).transpose(-2, -1) @ dout


@pytest.mark.parametrize("causal", [False, True])
def test_flash_rounded_terms_predict_the_size_of_a_flash_backwards_rounding_errors(causal):
    """The root-sum-square hook is a sound floor only if it has the size of the errors the
    roundings make: here bf16 roundings at a flash backward's points, simulated in fp64, stay
    within 4 unit roundoffs of it everywhere and are not far smaller than it (median above 0.05)."""
    import references.flash_attention as fa

    gen = torch.Generator().manual_seed(3)
    q, k, v, dout = (torch.randn(1, 2, 96, 16, generator=gen, dtype=torch.float64) for _ in range(4))
    dlse = torch.randn(1, 2, 96, generator=gen, dtype=torch.float64)
    scale = 0.25
    exact = _flash_grads_with_roundings(q, k, v, dout, dlse, causal, scale, lambda t: t)
    rounded = _flash_grads_with_roundings(q, k, v, dout, dlse, causal, scale,
                                          lambda t: t.to(torch.bfloat16).to(torch.float64))
    rss = fa.gradient_rounded_terms(q, k, v, causal, scale, grad_outputs=[dout, dlse])
    unit = torch.finfo(torch.bfloat16).eps / 2
    for name, e, r in zip("qkv", exact, rounded):
        ratio = (r - e).abs() / (unit * rss[name])
        assert float(ratio.max()) <= 4.0, name
        assert float(ratio.median()) >= 0.05, name
