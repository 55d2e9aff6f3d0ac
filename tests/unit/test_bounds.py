"""Error floors derived from the reference itself (harness.bounds): zero where nothing cancels, an
ulp of the terms where a sum cancels, through autograd too; a correct kernel that differs by such
ulps passes without hand-written term hooks, and a wrong one still fails."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import bounds
from harness.checks import as_outputs, check_forward, grad_names, prepare, _grad_outputs
from harness.numerics import Budget, Compared, compare
from harness.registry import load_specs
from harness.strategies import cases
from references import layer_norm as layer_norm_reference
from references import rms_norm as rms_norm_reference

EPS32 = torch.finfo(torch.float32).eps
ROUNDINGS = 4  # ulps of a result that a chain of a few unamplified roundings may make


def test_sums_and_products_that_do_not_cancel_add_no_floor():
    x = torch.rand(4, 64) + 0.5
    w = torch.rand(64) + 0.5
    (floor,) = bounds.forward_floors(lambda x, w: (x * w).sum(-1) / (x.exp() + 1.0).sum(-1), {"x": x, "w": w})
    assert floor.shape == (4,) and torch.equal(floor, torch.zeros(4, dtype=torch.float64))


def test_a_cancelling_sum_keeps_an_ulp_of_its_terms():
    """sum(x) of exact fp32 inputs that cancel: the accumulator's ulp of sum |x| beyond the result;
    a difference of two rounded products: both roundings, an ulp of each product."""
    x = torch.tensor([[1.0, -1.0, 2.0**-20, 3.0, -3.0]])
    (floor,) = bounds.forward_floors(lambda x: x.sum(-1), {"x": x})
    terms, result = 8.0 + 2.0**-20, 2.0**-20
    assert floor.item() == pytest.approx(EPS32 * (terms - result))
    a, b = torch.tensor([3.0]), torch.tensor([1.0 / 3.0])
    (floor,) = bounds.forward_floors(lambda a, b: a * b - b * a, {"a": a, "b": b})
    assert floor.item() == pytest.approx(2 * EPS32 * 1.0)  # both products ~1, each rounded once


def test_a_matmul_keeps_an_accumulator_ulp_of_its_cancelling_products_and_linear_decomposes_to_it():
    a = torch.tensor([[1.0, -1.0, 0.5]])
    b = torch.tensor([[1.0], [1.0 - 2.0**-20], [2.0**-22]])
    magnitudes = (a.abs().double() @ b.abs().double()).item()
    result = abs((a.double() @ b.double()).item())
    (floor,) = bounds.forward_floors(lambda a, b: a @ b, {"a": a, "b": b})
    assert floor.item() == pytest.approx(EPS32 * (magnitudes - result))
    (linear,) = bounds.forward_floors(lambda a, b: F.linear(a, b.t()), {"a": a, "b": b})
    assert linear.item() == pytest.approx(floor.item())


def test_in_place_operators_and_views_carry_their_errors_as_the_functional_ones_do():
    x = torch.tensor([[3.0, -3.0 + 2.0**-18, 1.0]])
    y = torch.ones(1, 3)

    def in_place(x, y):
        z = x.clone()
        z.add_(y)
        z[:, 0].mul_(2.0)  # through a view of z
        return z.sum(-1)

    def functional(x, y):
        z = x + y
        return torch.cat([z[:, :1] * 2.0, z[:, 1:]], -1).sum(-1)

    (got,) = bounds.forward_floors(in_place, {"x": x, "y": y})
    (want,) = bounds.forward_floors(functional, {"x": x, "y": y})
    assert got.item() > 0 and torch.equal(got, want)


def test_a_function_does_not_make_its_own_conditioning_a_floor():
    """exp of a rounded difference: eager's measured error judges the function's conditioning
    (harness.numerics' sensitivity term), so a fast exp is still held to its declared allowance."""
    s = torch.tensor([[0.0, -70.3, -3.1]])
    (floor,) = bounds.forward_floors(lambda s: torch.softmax(s, -1), {"s": s})
    assert torch.equal(floor, torch.zeros_like(floor))


def test_16_bit_operators_round_where_eager_rounds():
    """A bf16 LayerNorm forms its sums in fp32 (the decomposition's upcast): their cancellation is
    an fp32 ulp of the terms, far below the bf16 result's own, so the forward's floor is ~0; a bf16
    sum rounded to bf16 before it is subtracted keeps a bf16 ulp of it."""
    x = torch.randn(4, 256).to(torch.bfloat16) + 3
    (floor,) = bounds.forward_floors(lambda x: F.layer_norm(x, (256,)), {"x": x})
    assert floor.max() < 1e-4
    (floor,) = bounds.forward_floors(lambda x: x - x.sum(-1, keepdim=True) / 256, {"x": x})
    mean = x.double().mean(-1, keepdim=True)
    assert torch.allclose(floor.amax(-1), (torch.finfo(torch.bfloat16).eps * mean.abs()).squeeze(-1), rtol=0.6)


def _large_mean_rows(dtype=torch.float32) -> dict:
    torch.manual_seed(0)
    return {"x": (torch.randn(6, 128) + 40).to(dtype), "weight": torch.randn(128).to(dtype),
            "bias": torch.randn(128).to(dtype), "eps": 1e-5}


def _gradients(reference, kwargs: dict, names: tuple[str, ...], grad: torch.Tensor) -> tuple:
    leaves = {k: (v.clone().requires_grad_(True) if k in names else v) for k, v in kwargs.items()}
    return torch.autograd.grad(reference(**leaves), [leaves[n] for n in names], grad)


@pytest.mark.parametrize("reference, names", [
    (layer_norm_reference, ("x", "weight", "bias")),
    (rms_norm_reference, ("x", "weight")),
], ids=["layer_norm", "rms_norm"])
def test_norm_floors_bound_eagers_own_error_and_are_no_looser_than_the_hand_derived_terms(reference, names):
    """Rows far from zero mean, where x - mean and the gradients' sums cancel: eager's own fp32
    error stays within the derived floor plus an ulp of the result, forward and every gradient;
    and the floors are no looser than an fp32 ulp of the term magnitudes each spec derives by hand
    (an upper bound, where the derivation follows the reference's actual roundings). The roundings
    that nothing amplifies are eager's measured error's to cover, not the floor's: a few ulps."""
    kwargs = _large_mean_rows()
    if "bias" not in names:
        kwargs.pop("bias")
        kwargs["weight_offset"] = 0.0
    function = reference.layer_norm if reference is layer_norm_reference else reference.rms_norm
    exact = {k: _f64(v) for k, v in kwargs.items()}
    (floor,) = bounds.forward_floors(function, kwargs)
    oracle = function(**exact)
    assert ((function(**kwargs).double() - oracle).abs() <= floor + ROUNDINGS * EPS32 * oracle.abs()).all()
    grad = torch.randn(6, 128)
    floors = bounds.gradient_floors(function, kwargs, names, [grad])
    eager, oracles = _gradients(function, kwargs, names, grad), _gradients(function, exact, names, grad.double())
    hands = reference.gradient_term_magnitudes(**exact, grad_output=grad.double())
    for name, e, o in zip(names, eager, oracles):
        assert ((e.double() - o).abs() <= floors[name] + ROUNDINGS * EPS32 * o.abs()).all(), name
        assert (floors[name] <= 2 * EPS32 * hands[name] + EPS32 * o.abs()).all(), name


def _f64(v):
    return v.double() if isinstance(v, torch.Tensor) else v


def test_an_outsiders_layer_norm_passes_on_derived_floors_and_a_one_pass_variance_fails():
    """The H100 case behind the spec's hand-written terms, exactly: an element that sits on its
    row's mean (the oracle's output 0, its terms ~2 |mean| rstd |w|), eager correctly rounded
    everywhere (lucky), and a correct kernel half an fp32 ulp of the terms off there: the rounding
    of an fp32 mean. Without a floor that fails; with the floor derived from the reference it
    passes. A LayerNorm whose variance is E[x^2] - E[x]^2 in fp32 fails with the floor."""
    torch.manual_seed(0)
    delta = torch.randint(1, 2**16, (63,)).double() * 2.0**-16  # 40 +- delta: exact in fp32
    x = torch.cat([40 + delta, 40 - delta, torch.tensor([40.0], dtype=torch.float64)]).float().unsqueeze(0)
    kwargs = {"x": x, "weight": torch.randn(127), "bias": None, "eps": 1e-5}
    exact = {k: _f64(v) for k, v in kwargs.items()}
    oracle = layer_norm_reference.layer_norm(**exact)
    assert oracle[0, -1] == 0
    eager = oracle.float()
    hand = layer_norm_reference.term_magnitudes(**exact)
    correct = eager.clone()
    correct[0, -1] = 0.5 * EPS32 * hand[0, -1]
    (floor,) = bounds.forward_floors(layer_norm_reference.layer_norm, kwargs)
    budget = Budget(2.0)
    without = compare(budget, Compared("y", correct, eager, oracle))
    assert not without.passed and without.envelope_source == "eager's error"
    verdict = compare(budget, Compared("y", correct, eager, oracle, derived=floor))
    assert verdict.passed and verdict.worst_index == (0, 126)
    assert "envelope there" in verdict.summary() and "(set by the floor derived from the reference)" in verdict.summary()
    mean = x.mean(-1, keepdim=True)
    one_pass = (x - mean) * torch.rsqrt((x * x).mean(-1, keepdim=True) - mean * mean + 1e-5) * kwargs["weight"]
    verdict = compare(budget, Compared("y", one_pass, eager, oracle, derived=floor))
    assert not verdict.passed, verdict.summary()


def test_every_registered_reference_derives_its_floors():
    """Every spec's reference, forward and backward, on a drawn case of each dtype: no operator
    without a rule (a NotDerivable here would leave that spec judged without floors)."""
    specs = load_specs()

    @settings(max_examples=1, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def derive(data):
        for spec in specs.values():
            if spec.random is not None:
                continue  # its reference replays the kernel's mask: covered by the checks' tests
            for dtype in spec.float_dtypes:
                case = data.draw(cases(spec, dtype, False))
                prepared = prepare(case, "cpu")
                bounds.forward_floors(spec.reference, prepared.copies())
                names = grad_names(spec, case)
                if names:
                    outs = [o for o in as_outputs(spec.reference(**prepared.copies(grad_names=names)))
                            if o.requires_grad]
                    grads = [g.tensor for g in _grad_outputs(case, tuple(outs), "cpu", "contiguous")]
                    floors = bounds.gradient_floors(spec.reference, prepared.copies(), names, grads)
                    assert set(floors) == set(names)

    derive()


def test_an_operator_without_a_rule_is_named_and_the_check_still_judges():
    x = torch.randn(8)
    with pytest.raises(bounds.NotDerivable, match="bessel_j0"):
        bounds.forward_floors(lambda x: torch.special.bessel_j0(x) - x, {"x": x})
    result, derivation, _ = _checked_with_an_underivable_reference(check_forward)
    assert result.passed
    assert any("bessel_j0" in m for m in derivation)


def _checked_with_an_underivable_reference(check) -> tuple:
    """``check`` of softmax on its first tiling case, the reference made underivable (bessel_j0 has
    no rule): the result, the DerivationWarnings' messages and the case."""
    from dataclasses import replace

    spec = load_specs()["softmax"]
    odd = replace(spec, reference=lambda x: torch.special.bessel_j0(x) * 0 + torch.softmax(x, -1))
    case = next(iter(_softmax_cases(spec)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = check(odd, lambda x: torch.softmax(x, -1), case, "cpu")
    return result, [str(w.message) for w in caught if issubclass(w.category, bounds.DerivationWarning)], case


def _softmax_cases(spec):
    from harness.strategies import tiling_examples

    return tiling_examples(spec, "float32", False, 0)


@pytest.mark.parametrize("check", ["forward", "backward"])
@pytest.mark.parametrize("spec_name", ["layer_norm", "rms_norm"])
def test_our_norms_pass_with_their_hand_written_terms_taken_away(spec_name, check):
    """A LayerNorm or RMSNorm from outside needs no hand-derived term formulas: ours, judged with
    none (floors derived from the reference alone), passes its property (at the profile's count,
    at most 4 examples a dtype on the CPU; the GPU runs the profile's whole count)."""
    from dataclasses import replace

    from harness.device import current_device
    from harness.runner import PropertyRun

    spec = load_specs()[spec_name]
    bare = replace(spec, numerics=replace(spec.numerics, term_magnitudes=None, gradient_term_magnitudes=None,
                                          gradient_rounded_terms=None, term_precision=None))
    from hypothesis import settings as profile

    from harness.device import on_gpu

    device = current_device()
    count = profile.default.max_examples if on_gpu(device) else min(4, profile.default.max_examples)
    for dtype in ("float32", "bfloat16"):
        PropertyRun(bare, "triton", dtype, check, device, max_examples=count).run()


def test_the_approximations_allowance_is_the_same_with_the_plain_floors_given_or_derived_again():
    """checks passes the gradients' plain floors it derived already; the allowance must not change."""
    x = torch.tensor([[0.0, -1.0, -70.0, float("-inf"), -0.5], [3.0, 2.5, -40.0, 0.0, 1.0]])
    dy = torch.tensor([[0.3, -1.0, 2.0, 0.5, 0.7], [1.0, 0.0, -2.0, 0.25, 0.5]])
    ref = lambda x: torch.softmax(x, -1)  # noqa: E731
    plain = bounds.gradient_floors(ref, {"x": x}, ("x",), [dy])
    given = bounds.approximate_allowances(ref, {"x": x}, ("x",), [dy], frozenset({"exp"}), plain=plain)["x"]
    again = bounds.approximate_allowances(ref, {"x": x}, ("x",), [dy], frozenset({"exp"}))["x"]
    assert torch.equal(given, again) and (given > 0).any()


def test_a_reference_the_analysis_cannot_follow_warns_once_per_gradient_pass_and_gets_no_allowance():
    """softmax declares its fast exp: where the gradients' floors cannot be derived, the allowance
    (the same analysis) is not tried again, so the check warns once for it, not twice."""
    from harness.checks import check_backward

    result, derivation, case = _checked_with_an_underivable_reference(check_backward)
    assert result.passed
    passes = 1 + (case.grad_layout != "contiguous")
    assert len(derivation) == passes and all("no derived error floor" in m for m in derivation)


def test_a_spec_that_opts_out_of_the_analysis_gets_no_gradient_allowance():
    from dataclasses import replace

    from harness.checks import approximate_gradient_allowances

    spec = load_specs()["softmax"]
    case = next(iter(_softmax_cases(spec)))
    prepared = prepare(case, "cpu")
    grads = [torch.ones(prepared.kwargs()["x"].shape)]
    assert approximate_gradient_allowances(spec, prepared, ("x",), grads, False, derived={}) == {}  # it raised
    plain = bounds.gradient_floors(spec.reference, prepared.copies(), ("x",), grads)
    assert approximate_gradient_allowances(spec, prepared, ("x",), grads, False, derived=plain)["x"] is not None
    off = replace(spec, numerics=replace(spec.numerics, derive_floors=False))
    assert approximate_gradient_allowances(off, prepared, ("x",), grads, False, derived=plain) == {}
