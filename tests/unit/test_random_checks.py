"""The dropout checks (``harness.random_checks``) pass a correct random kernel and fail broken ones.

The kernels here are small eager-torch stand-ins for a fused dropout kernel, ``dropout(x) +
residual``, whose keep-mask is a function of the seed and each element's logical position (what a
counter-based Philox kernel gives): fast on the CPU, and each broken variant differs from the
correct one in exactly one way. Every property the issue asks for is shown both ways: the correct
kernel passes it and a variant breaking it fails, in the check meant to catch it.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import strategies as st

from harness.case import Case, TensorRecipe
from harness.dispatch import run_check
from harness.layouts import Layout
from harness.random_checks import ALPHA, SEEDS, binomial_p_value, failed, mask_statistics, shifts
from harness.spec import Dim, KernelSpec, RandomSpec, TensorArg
from kernels._runtime import kernel_device_type

# ---- a toy random kernel, its reference and its broken variants ---------------------------------


def _scale(p: float) -> float:
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


def _mask(shape, p: float, seed: int) -> torch.Tensor:
    """Keep-mask from the seed and the logical position only: element kept when its uniform >= p."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=gen, dtype=torch.float64) >= p


class _Dropout(torch.autograd.Function):
    """out = x * keep * scale + residual; the backward applies ``grad_keep`` (a correct kernel
    regenerates the forward's mask, a broken one may not)."""

    @staticmethod
    def forward(ctx, x, residual, keep, scale, grad_keep):
        ctx.save_for_backward(grad_keep)
        ctx.scale = scale
        return x * keep.to(x.dtype) * scale + residual

    @staticmethod
    def backward(ctx, grad):
        (grad_keep,) = ctx.saved_tensors
        return grad * grad_keep.to(grad.dtype) * ctx.scale, grad, None, None, None


def make_kernel(*, scale=_scale, mask=_mask, backward_seed_shift=0, returned_seed_shift=0, p_floor=0.0):
    """A dropout kernel; the keywords each break one thing (defaults: correct)."""

    def kernel(x, residual, p, seed, return_mask=False):
        shape = tuple(x.shape)
        p_used = max(p, p_floor)
        keep = mask(shape, p_used, seed)
        out = _Dropout.apply(x, residual, keep, scale(p), mask(shape, p_used, seed + backward_seed_shift))
        return (out, mask(shape, p_used, seed + returned_seed_shift)) if return_mask else out

    return kernel


def reference(x, residual, p, seed, return_mask=False, mask=None):
    """Eager: F.dropout's formula on a given mask, or torch's own dropout without one."""
    if mask is None:
        dropped, keep = torch.native_dropout(x, p, True)
    else:
        keep = mask.bool()
        dropped = x * keep.to(x.dtype) * _scale(p)
    out = dropped + residual
    return (out, keep) if return_mask else out


SPEC = KernelSpec(
    name="toy_dropout",
    reference=reference,
    implementations={"toy": make_kernel()},
    tensors=(
        TensorArg("x", dims=("rows", "cols"), grad=True),
        TensorArg("residual", dims=("rows", "cols"), grad=True),
    ),
    dims={"rows": Dim(cpu_max=64), "cols": Dim(cpu_max=64)},
    scalars={"p": st.just(0.3), "seed": st.integers(0, 2**31 - 1), "return_mask": st.booleans()},
    random=RandomSpec(seed="seed", p="p", mask_scalars={"return_mask": True}, reference_mask="mask"),
    dtypes=("float32", "float64"),
)


def case(p=0.3, seed=1234, rows=24, cols=40, dtype="float32", return_mask=False, layout=Layout()) -> Case:
    tensors = {
        name: TensorRecipe((rows, cols), dtype, layout, "normal", k + 7) for k, name in enumerate(("x", "residual"))
    }
    return Case(spec=SPEC.name, dtype=dtype, dims={"rows": rows, "cols": cols}, tensors=tensors,
                scalars={"p": p, "seed": seed, "return_mask": return_mask}, grad_layout="contiguous", grad_seed=3)


def run(kernel, check, **case_args):
    return run_check(SPEC, kernel, check, case(**case_args), "cpu")


def _problems(result) -> str:
    return result.details()


# ---- the correct kernel passes everything ------------------------------------------------------


@pytest.mark.parametrize("check", ["forward", "backward", "unwritten", "dropout", "determinism", "guards"])
@pytest.mark.parametrize("p", [0.0, 0.3, 0.9, 1.0])
def test_correct_kernel_passes(check, p):
    result = run(make_kernel(), check, p=p)
    assert result.passed, _problems(result)


def test_correct_kernel_passes_on_strided_inputs_and_with_the_mask_returned():
    strided = Layout(steps=(1, 2), offset=3)
    for check in ("forward", "backward", "dropout"):
        result = run(make_kernel(), check, layout=strided, return_mask=True)
        assert result.passed, _problems(result)


# ---- p = 0 is the deterministic op ---------------------------------------------------------------


def test_p0_equals_the_deterministic_reference_exactly():
    """At p = 0 the reference without a mask is F.dropout's identity (the deterministic op), the
    toy kernel's output equals it bitwise, and the dropout check's p = 0 comparison passes it."""
    prepared = case(p=0.0).tensors
    x, residual = (prepared[n].build("cpu").tensor for n in ("x", "residual"))
    out = make_kernel()(x, residual, p=0.0, seed=5)
    assert torch.equal(out, reference(x, residual, p=0.0, seed=0))
    assert torch.equal(out, x + residual)
    result = run(make_kernel(), "dropout", p=0.0)
    assert result.passed, _problems(result)
    assert [c.name for c in result.comparisons] == ["p = 0: out"]


def test_p0_check_fails_a_kernel_that_still_drops_at_p0():
    broken = make_kernel(p_floor=0.05)  # correct for p >= 0.05, dropping 5% at p = 0
    assert run(broken, "forward", p=0.3).passed
    result = run(broken, "dropout", p=0.3)  # the dropout check always tries p = 0 too
    assert not result.passed
    assert "p = 0 dropped" in _problems(result)


def test_p0_check_fails_a_kernel_whose_deterministic_path_scales():
    broken = make_kernel(scale=lambda p: 1.0 / (1.0 - p) + (1e-3 if p == 0 else 0.0))
    result = run(broken, "dropout", p=0.0)
    assert not result.passed
    assert "p = 0: out" in _problems(result)


# ---- a fixed seed reproduces; different seeds differ ---------------------------------------------


def test_fixed_seed_reproduces_bitwise():
    k = make_kernel()
    x = torch.randn(16, 16)
    r = torch.randn(16, 16)
    a, ma = k(x, r, p=0.5, seed=99, return_mask=True)
    b, mb = k(x.clone(), r.clone(), p=0.5, seed=99, return_mask=True)
    assert torch.equal(a, b) and torch.equal(ma, mb)


def test_a_kernel_that_does_not_reproduce_fails():
    def global_rng(shape, p, seed):  # ignores the seed, draws from torch's global generator
        return torch.rand(shape, dtype=torch.float64) >= p

    result = run(make_kernel(mask=global_rng), "dropout")
    assert not result.passed
    assert "a second call with the same seed" in _problems(result)


def test_a_kernel_that_ignores_the_seed_fails():
    def fixed(shape, p, seed):  # reproducible, a fair mask, but the same for every seed
        return _mask(shape, p, 0)

    result = run(make_kernel(mask=fixed), "dropout")
    assert not result.passed
    assert "whose masks differ" in _problems(result)


def test_a_mask_that_depends_on_memory_layout_fails():
    def by_storage(shape, p, seed):  # what a kernel indexing its stream by a strided offset does
        m = _mask((shape[0], shape[1] * 2), p, seed)  # reads every second element of a wider stream
        return m[:, ::2] if by_storage.strided else m[:, : shape[1]]

    by_storage.strided = False

    def kernel(x, residual, p, seed, return_mask=False):
        by_storage.strided = not x.is_contiguous()
        return make_kernel(mask=by_storage)(x, residual, p, seed, return_mask)

    result = run(kernel, "dropout", layout=Layout(steps=(1, 2)))
    assert not result.passed
    assert "changes when the inputs are made contiguous" in _problems(result)


# ---- the kept fraction and the scale -------------------------------------------------------------


def test_wrong_kept_fraction_fails_the_statistical_test():
    result = run(make_kernel(mask=lambda shape, p, seed: _mask(shape, p * 0.7, seed)), "dropout", p=0.3)
    assert not result.passed
    assert "kept fraction" in _problems(result)


def test_a_mask_repeated_over_rows_fails_the_statistical_test():
    def per_row(shape, p, seed):  # one stream for the row, reused by every row
        return _mask(shape[-1:], p, seed).expand(shape).clone()

    result = run(make_kernel(mask=per_row), "dropout", p=0.3)
    assert not result.passed
    assert "apart that agree" in _problems(result)


@pytest.mark.parametrize("scale", [lambda p: 1.0, lambda p: 1.0 / (1.0 - p) ** 2, lambda p: (1.0 - p)])
def test_wrong_scaling_fails_mask_replay(scale):
    broken = make_kernel(scale=scale)
    assert run(make_kernel(), "forward").passed
    result = run(broken, "forward")
    assert not result.passed, "a wrong 1/(1-p) scale must fail the replayed forward"
    assert not run(broken, "backward").passed


def test_statistical_scale_test_follows_the_kept_fraction():
    """The mean of keep / (1-p) is 1 exactly when the kept fraction is 1 - p: with the per-element
    scale pinned by replay, the kept-fraction test is the statistical test of the scale."""
    p = 0.25
    masks = [_mask((64, 64), p, s) for s in range(SEEDS)]
    kept = sum(int(m.sum()) for m in masks) / (len(masks) * 64 * 64)
    assert abs(kept / (1 - p) - 1.0) < 0.03
    tests, level = mask_statistics(masks, p)
    assert not failed(tests, level)


# ---- mask replay ties the mask to what the kernel applied ------------------------------------------


def test_a_returned_mask_that_is_not_the_applied_one_fails_forward():
    result = run(make_kernel(returned_seed_shift=1), "forward")
    assert not result.passed


def test_a_backward_through_another_mask_fails_backward():
    broken = make_kernel(backward_seed_shift=1)
    assert run(broken, "forward").passed  # the forward alone cannot see it
    result = run(broken, "backward")
    assert not result.passed


def test_replayed_outputs_and_gradients_match_under_the_budget():
    for check in ("forward", "backward"):
        result = run(make_kernel(), check, p=0.5, dtype="float32")
        assert result.passed, _problems(result)
        assert result.comparisons and result.score <= SPEC.numerics.multiple_for("float32")


# ---- the statistics themselves --------------------------------------------------------------------


def test_binomial_p_value():
    assert binomial_p_value(50, 100, 0.5) == pytest.approx(1.0)
    # Two-sided exact tail: P(X <= 0) + P(X >= 10) for Binomial(10, 0.5) = 2 / 1024.
    assert binomial_p_value(0, 10, 0.5) == pytest.approx(2 / 1024)
    assert binomial_p_value(0, 5, 0.0) == 1.0 and binomial_p_value(1, 5, 0.0) == 0.0
    assert binomial_p_value(5, 5, 1.0) == 1.0 and binomial_p_value(4, 5, 1.0) == 0.0


def test_shifts_cover_powers_of_two_and_each_dimension():
    assert shifts((3, 5)) == [1, 2, 4, 5, 8]
    assert shifts((1,)) == []


def test_each_test_runs_at_alpha_over_their_number():
    tests, level = mask_statistics([_mask((8, 8), 0.5, s) for s in range(3)], 0.5)
    assert level == pytest.approx(ALPHA / len(tests))


def test_false_alarm_rate_is_at_most_the_stated_alpha():
    """Under the null (fair, independent masks) a whole example fails with probability <= alpha (union
    bound). Checked at a measurable alpha = 0.05 over 400 examples (fixed seeds, no flakiness): the
    failure count must be within what Binomial(400, 0.05) allows at its 1e-4 upper tail."""
    alpha, examples = 0.05, 400
    alarms = 0
    for e in range(examples):
        p = (0.1, 0.3, 0.5, 0.8)[e % 4]
        masks = [_mask((6, 20), p, 10_000 * e + s) for s in range(SEEDS)]
        tests, level = mask_statistics(masks, p, alpha=alpha)
        alarms += bool(failed(tests, level))
    upper = next(k for k in range(examples + 1)
                 if sum(math.comb(examples, j) * alpha**j * (1 - alpha) ** (examples - j) for j in range(k + 1, examples + 1)) < 1e-4)
    assert alarms <= upper, f"{alarms} false alarms in {examples} examples at alpha={alpha}"


def test_kept_fraction_power_matches_the_stated_size():
    """At p = 0.3 the test flags a kept fraction about 5.4 standard errors off (module docstring):
    on 64 x 64 x 3 elements that is 0.022, so keeping 75% instead of 70% is found."""
    masks = [_mask((64, 64), 0.25, s) for s in range(SEEDS)]
    tests, level = mask_statistics(masks, 0.3)
    assert "kept fraction" in [t.name for t in failed(tests, level)]  # (the pair tests, expecting
    # p = 0.3's agreement rates, see it too)
    fair = [_mask((64, 64), 0.3, s) for s in range(SEEDS)]
    assert not failed(*mask_statistics(fair, 0.3))


# ---- the real kernel: dropout_add_norm with planted faults --------------------------------------


def _real_case(rows=6, cols=40, p=0.3):
    from harness.registry import load_specs

    spec = load_specs()["dropout_add_norm"]
    tensors = {
        arg.name: TensorRecipe((rows, cols) if arg.dims[-2:] == ("rows", "cols") else (cols,), "float32", Layout(),
                               "normal", k + 1)
        for k, arg in enumerate(spec.tensors)
    }
    scalars = {"p": p, "seed": 77, "norm": "layer", "eps": 1e-5, "prenorm": True, "return_mask": False}
    return spec, Case(spec=spec.name, dtype="float32", dims={"*batch": [], "rows": rows, "cols": cols},
                      tensors=tensors, scalars=scalars, grad_layout="contiguous", grad_seed=5)


def _real_results(monkeypatch, of=None, checks=("forward", "backward", "dropout"), **case_args):
    from kernels import _norm

    if of is not None:
        original = _norm.Dropout.of
        monkeypatch.setattr(_norm.Dropout, "of", classmethod(lambda cls, p, seed: of(original, p, seed)))
    spec, real = _real_case(**case_args)
    fn = spec.implementations["triton"].load()
    return {check: run_check(spec, fn, check, real, kernel_device_type()).passed for check in checks}


def test_real_kernel_passes(monkeypatch):
    assert _real_results(monkeypatch) == {"forward": True, "backward": True, "dropout": True}


def test_real_kernel_with_a_wrong_scale_fails_replay(monkeypatch):
    results = _real_results(monkeypatch, lambda of, p, seed: of(p, seed)._replace(scale=of(p, seed).scale * 1.01))
    assert not results["forward"] and not results["backward"]


def test_real_kernel_ignoring_the_seed_fails_the_dropout_check(monkeypatch):
    results = _real_results(monkeypatch, lambda of, p, seed: of(p, 0))
    assert results == {"forward": True, "backward": True, "dropout": False}


def test_real_kernel_with_a_wrong_keep_probability_fails_the_dropout_check(monkeypatch):
    # Drops at p/2 but scales by 1/(1-p): the mask it returns is the one it applied, so replay
    # passes; only the mask's law shows the fault (16 x 64 x 3 elements: 0.045 detectable, 0.15 off).
    wrong = lambda of, p, seed: of(p / 2, seed)._replace(scale=of(p, seed).scale)  # noqa: E731
    results = _real_results(monkeypatch, wrong, rows=16, cols=64)
    assert results == {"forward": True, "backward": True, "dropout": False}

