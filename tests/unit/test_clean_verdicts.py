"""A kernel that writes into its inputs or its grad_output is reported once, for that write: the
references run on the pristine tensors, so no numerics derive from the overwritten values, and
the determinism check does not read the write as nondeterminism."""

import torch

from harness import Dim, KernelSpec, TensorArg
from harness.case import Case, TensorRecipe
from harness.dispatch import run_check
from harness.device import current_device
from harness.layouts import Layout


def _double(x):
    return x * 2


class _GradIntoGradOutput(torch.autograd.Function):
    """A correct gradient, written into grad_output's storage (as a backward that reuses dY for dX)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, dy):
        return dy.mul_(2)


def _writes_grad_output(x):
    return _GradIntoGradOutput.apply(x)


def _writes_input(x):
    out = x * 2
    with torch.no_grad():  # as a Triton kernel's store would: autograd does not see it
        x.mul_(3)  # the output is right; the caller's input is not left alone
    return out


def _spec(fn):
    return KernelSpec(name="inplace_demo", reference=_double, implementations={"torch": fn},
                      tensors=(TensorArg("x", dims=("n",), grad=True),), dims={"n": Dim(cpu_max=8, gpu_max=8)},
                      dtypes=("float32",))


def _case():
    return Case(spec="inplace_demo", dtype="float32", dims={"n": 7},
                tensors={"x": TensorRecipe((7,), "float32", Layout(), "normal", 3)}, scalars={},
                grad_layout="contiguous", grad_seed=1)


def test_a_backward_that_writes_into_grad_output_is_reported_once_as_that_write():
    result = run_check(_spec(_writes_grad_output), _writes_grad_output, "backward", _case(), current_device())
    assert not result.passed
    assert result.problems == ["grad_output[0] (contiguous): 7 element(s) in the tensor's own elements "
                               "(input modified in place), first at buffer index 256"]
    assert result.comparisons == []  # no numerics scored on the overwritten grad_output
    assert run_check(_spec(_double), _double, "backward", _case(), current_device()).passed  # the honest kernel


def test_a_forward_that_writes_into_its_input_is_reported_once_as_that_write():
    result = run_check(_spec(_writes_input), _writes_input, "forward", _case(), current_device())
    assert not result.passed and result.comparisons == []
    (problem,) = result.problems
    assert problem.startswith("the forward wrote into its inputs: input 'x': 7 element(s) in the tensor's own elements")


def test_determinism_does_not_read_an_in_place_write_as_different_bits():
    for fn in (_writes_grad_output, _writes_input):
        assert run_check(_spec(fn), fn, "determinism", _case(), current_device()).passed


def _leaves_last_unwritten(x):
    out = torch.empty_like(x)
    out[:-1] = x[:-1] * 2
    return out


def _writes_a_computed_nan(x):
    out = x * 2
    out[0] = float("inf") - float("inf")  # a NaN the kernel made, as from a guard band's canary
    return out


def test_the_unwritten_check_tells_never_written_from_computed_nans():
    device = current_device()
    (never,) = run_check(_spec(_leaves_last_unwritten), _leaves_last_unwritten, "unwritten", _case(), device).problems
    assert never == "out: 1 of 7 element(s) still hold the allocation poison (never written), first at index (6,)"
    (computed,) = run_check(_spec(_writes_a_computed_nan), _writes_a_computed_nan, "unwritten", _case(), device).problems
    assert computed.startswith("out: 1 of 7 element(s) were written as NaN where eager's are not (not the allocation "
                               "poison") and computed.endswith("first at index (0,)")


class _WrongSlope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, dy):
        return dy * 3  # a backward term off


def _wrong_slope(x):
    return _WrongSlope.apply(x)


def test_gradcheck_fails_a_wrong_backward_without_recomputing_the_jacobians_to_word_it(monkeypatch):
    calls = []
    real = torch.autograd.gradcheck

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.autograd, "gradcheck", recording)
    spec = KernelSpec(name="slope_demo", reference=_double, implementations={"torch": _wrong_slope},
                      tensors=(TensorArg("x", dims=("n",), grad=True),), dims={"n": Dim(cpu_max=8, gpu_max=8)},
                      dtypes=("float32", "float64"))
    case = Case(spec="slope_demo", dtype="float64", dims={"n": 5},
                tensors={"x": TensorRecipe((5,), "float64", Layout(), "normal", 3)}, scalars={},
                grad_layout="contiguous", grad_seed=1)
    result = run_check(spec, _wrong_slope, "gradcheck", case, current_device())
    assert not result.passed
    assert result.problems == ["gradcheck failed: the backward's gradient of 'x' differs from the numerical "
                               "derivative (fast mode, float64); the backward check names the gradient and the elements"]
    assert calls and all(c["fast_mode"] and c["raise_exception"] is False for c in calls)
    assert run_check(spec, _double, "gradcheck", case, current_device()).passed
