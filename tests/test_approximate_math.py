"""Kernels on the GPU's fast exp and sigmoid pass when they declare it, and only then; a planted
4-ulp error away from the tails fails either way (harness.approximate). The same for a gradient
computed from the forward's approximate results (harness.bounds.approximate_allowances)."""

import dataclasses
import functools

import pytest
import torch

from harness import Dim, KernelSpec, Numerics, SpecError, TensorArg
from harness.device import current_device
from harness.runner import CheckFailure, PropertyRun
from harness.validate import interpreting
from tests import approx_kernels

EXAMPLES = 60


def _softmax_spec(kernel, declare: bool) -> KernelSpec:
    return KernelSpec(
        name="fast_softmax",
        reference=lambda x: torch.softmax(x, -1),
        implementations={"triton": kernel},
        tensors=(TensorArg("x", dims=("rows", "cols"), grad=True, values=("large", "normal")),),
        dims={"rows": Dim(cpu_max=4, gpu_max=64), "cols": Dim(cpu_max=64, gpu_max=1024)},
        dtypes=("float32",),
        numerics=Numerics(
            approximate_math={"exp": lambda call: call["x"] - call["x"].amax(-1, keepdim=True)} if declare else {},
        ),
    )


def _silu_mul_spec(kernel, declare: bool) -> KernelSpec:
    return KernelSpec(
        name="fast_silu_mul",
        reference=lambda a, b: torch.nn.functional.silu(a) * b,
        implementations={"triton": kernel},
        tensors=(TensorArg("a", dims=("n",), values=("large", "normal")), TensorArg("b", dims=("n",))),
        dims={"n": Dim(cpu_max=64, gpu_max=4096)},
        dtypes=("float32",),
        numerics=Numerics(
            approximate_math={"sigmoid": lambda call: call["a"]} if declare else {},
        ),
    )


SUBJECTS = {
    "softmax": (_softmax_spec, approx_kernels.fast_softmax),
    "silu_mul": (_silu_mul_spec, approx_kernels.fast_silu_mul),
}


def _run(spec: KernelSpec, check: str = "forward") -> None:
    PropertyRun(spec, "triton", "float32", check, current_device(), max_examples=EXAMPLES).run()


@pytest.mark.parametrize("subject", SUBJECTS)
def test_a_kernel_on_the_fast_functions_passes_when_it_declares_them(subject):
    make, kernel = SUBJECTS[subject]
    _run(make(kernel, declare=True))


@pytest.mark.parametrize("subject", SUBJECTS)
def test_the_same_kernel_fails_in_the_tails_when_it_declares_nothing(subject):
    if interpreting():
        pytest.skip("the interpreter's exp is numpy's, correctly rounded: the fast approximation exists only on a GPU")
    make, kernel = SUBJECTS[subject]
    with pytest.raises(CheckFailure) as info:
        _run(make(kernel, declare=False))
    assert "OVER budget" in str(info.value)


@pytest.mark.parametrize("declare", [True, False], ids=["declared", "undeclared"])
@pytest.mark.parametrize("subject", SUBJECTS)
def test_a_planted_4_ulp_error_away_from_the_tails_fails_either_way(subject, declare):
    make, kernel = SUBJECTS[subject]
    with pytest.raises(CheckFailure) as info:
        _run(make(functools.partial(kernel, ulps_off=4), declare))
    assert "OVER budget" in str(info.value)


def test_an_unknown_approximate_function_is_named():
    spec = _softmax_spec(approx_kernels.fast_softmax, declare=False)
    with pytest.raises(SpecError, match="approximate_math: unknown function 'log'"):
        dataclasses.replace(spec, numerics=Numerics(approximate_math={"log": abs}))


def test_the_allowance_admits_a_tail_error_within_the_documented_bound_and_no_more():
    """On the CPU too: a softmax 30 fp32 ulps off at an element whose exponent argument is -70
    (bound 2 + 82 ulps) passes when the fast exp is declared and fails when it is not; 100 ulps
    fails either way; masked logits (-inf) get no allowance and make no NaN."""
    from harness import approximate
    from harness.numerics import Budget, Compared, compare

    x = torch.tensor([[0.0, -1.0, -70.0, float("-inf"), -0.5]])
    oracle = torch.softmax(x.double(), -1)
    eager = torch.softmax(x, -1)
    allowance = approximate.allowance("exp", x.double() - x.double().amax(-1, keepdim=True), oracle)
    assert allowance[0, 3] == 0 and allowance.isfinite().all()
    def off(ulps):
        kernel = eager.clone()
        kernel[0, 2] = kernel[0, 2] * (1 + ulps * torch.finfo(torch.float32).eps)
        return kernel
    assert compare(Budget(2.0), Compared("out", off(30), eager, oracle, allowance=allowance)).passed
    assert not compare(Budget(2.0), Compared("out", off(30), eager, oracle)).passed
    assert not compare(Budget(2.0), Compared("out", off(100), eager, oracle, allowance=allowance)).passed
    assert compare(Budget(2.0), Compared("out", eager, eager, oracle, allowance=allowance)).passed  # the masked logit: no NaN


def test_a_softmax_on_the_fast_exp_passes_the_backward_check_when_it_declares_it():
    _run(_softmax_spec(approx_kernels.fast_softmax, declare=True), "backward")


def test_its_backward_fails_in_the_tails_when_it_declares_nothing():
    if interpreting():
        pytest.skip("the interpreter's exp is numpy's, correctly rounded: the fast approximation exists only on a GPU")
    with pytest.raises(CheckFailure) as info:
        _run(_softmax_spec(approx_kernels.fast_softmax, declare=False), "backward")
    assert "OVER budget" in str(info.value)


@pytest.mark.parametrize("declare", [True, False], ids=["declared", "undeclared"])
def test_a_planted_gradient_error_where_the_probabilities_are_large_fails_either_way(declare):
    kernel = functools.partial(approx_kernels.fast_softmax, grad_ulps_off=64)
    with pytest.raises(CheckFailure) as info:
        _run(_softmax_spec(kernel, declare), "backward")
    assert "OVER budget" in str(info.value)


def test_a_gradient_may_err_by_the_forward_bound_carried_through_autograd_and_no_more():
    """On the CPU too: softmax's gradient at an element whose exponent argument is -70 may be off by
    the fast exp's bound there (2 + 82 ulps, plus the row's share through the sum): 60 ulps pass
    only with the allowance, 200 fail either way; at an element near the max, where nothing
    cancels, 12 ulps fail either way; no function declared, no allowance."""
    from harness import bounds
    from harness.numerics import Budget, Compared, compare

    x = torch.tensor([[0.0, -1.0, -70.0, float("-inf"), -0.5]])
    dy = torch.tensor([[0.3, -1.0, 2.0, 0.5, 0.7]])
    leaf, exact = x.clone().requires_grad_(), x.double().requires_grad_()
    eager = torch.autograd.grad(torch.softmax(leaf, -1), leaf, dy)[0]
    oracle = torch.autograd.grad(torch.softmax(exact, -1), exact, dy.double())[0]

    def allowance(functions):
        return bounds.approximate_allowances(lambda x: torch.softmax(x, -1), {"x": x}, ("x",), [dy], functions)["x"]

    declared = allowance(frozenset({"exp"}))
    assert declared.isfinite().all() and declared[0, 3] == 0  # the masked logit: an exact 0, no allowance
    assert (allowance(frozenset()) == 0).all()

    def off(i, ulps):
        kernel = eager.clone()
        kernel[0, i] = kernel[0, i] * (1 + ulps * torch.finfo(torch.float32).eps)
        return kernel

    def passes(kernel, allowed):
        return compare(Budget(4.0), Compared("grad x", kernel, eager, oracle, allowance=allowed)).passed

    assert passes(off(2, 60), declared) and not passes(off(2, 60), None)
    assert not passes(off(2, 200), declared)
    assert not passes(off(1, 12), declared) and not passes(off(1, 12), None)
    assert passes(eager, declared)
