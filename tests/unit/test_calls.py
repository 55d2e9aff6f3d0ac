"""A case is the exact call: optional tensors, axes of a product of sizes, scalars drawn from what
the call passes, and the ``Call`` that numerics hooks and performance models receive."""

import warnings

import pytest
import torch
from hypothesis import find
from hypothesis import strategies as st

from harness import BenchShape, Dim, KernelSpec, PerfModel, SpecError, TensorArg
from harness.bench.runner import bench_key, perf_call
from harness.call import Call
from harness.case import Case
from harness.checks import bad_calls, check_contract, check_forward
from harness.strategies import cases, tensor_shape


def _reference(x, bias, alpha):
    return x * alpha if bias is None else x * alpha + bias


def _kernel(x, bias, alpha):
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or x.device.type != "cpu":
        raise ValueError("'x' must be a float32 CPU tensor")
    if bias is not None and (bias.dtype != x.dtype or bias.device != x.device or bias.shape != x.shape[-1:]):
        raise ValueError("'bias' must be a vector of x's last size, dtype and device")
    return _reference(x, bias, alpha)


def _spec(kernel=_kernel, **changes):
    fields = dict(
        name="scaled_add", reference=_reference, implementations={"direct": kernel},
        tensors=(TensorArg("x", dims=("rows", "cols")), TensorArg("bias", dims=("cols",), optional=True)),
        dims={"rows": Dim(cpu_max=4), "cols": Dim(cpu_max=5)},
        scalars={"alpha": lambda drawn: st.just(2.0) if "bias" in drawn.present else st.just(-1.0)},
        dtypes=("float32",),
    )
    return KernelSpec(**{**fields, **changes})


def _case(spec, bias: bool) -> Case:
    return find(cases(spec, "float32", on_gpu=False), lambda c: (c.tensors["bias"] is not None) is bias)


def test_an_optional_tensor_is_drawn_passed_and_left_out_and_its_case_replays_from_json():
    spec = _spec()
    without, passed = _case(spec, bias=False), _case(spec, bias=True)
    assert without.tensors["bias"] is None and without.absent == ("bias",)
    assert passed.tensors["bias"].shape == (passed.dims["cols"],) and passed.absent == ()
    assert Case.from_json(without.to_json()) == without and "None (left out)" in without.describe()
    # the scalar's strategy saw which tensors the call passes
    assert (without.scalars["alpha"], passed.scalars["alpha"]) == (-1.0, 2.0)


def test_a_kernel_that_mishandles_a_left_out_tensor_fails_and_a_correct_one_passes():
    spec = _spec()

    def wrong(x, bias, alpha):  # treats a missing bias as a bias of ones
        return _kernel(x, x.new_ones(x.shape[-1:]) if bias is None else bias, alpha)

    for bias in (False, True):
        case = _case(spec, bias)
        assert check_forward(spec, _kernel, case, "cpu").passed
        assert check_forward(spec, wrong, case, "cpu").passed is bias


def test_the_contract_corrupts_only_the_tensors_a_call_passes():
    spec = _spec()
    without = [r.argument for r in bad_calls(spec, _case(spec, bias=False), "cpu")]
    passed = [r.argument for r in bad_calls(spec, _case(spec, bias=True), "cpu")]
    assert "bias" not in without and passed.count("bias") >= 3  # device, dtype, size
    assert check_contract(spec, _kernel, _case(spec, bias=True), "cpu").passed

    def unchecked(x, bias, alpha):  # validates x alone
        return _kernel(x, None, alpha) if bias is None else _kernel(x, None, alpha) + bias.to(x)

    result = check_contract(spec, unchecked, _case(spec, bias=True), "cpu")
    assert not result.passed and any("'bias'" in p for p in result.problems)


def test_an_axis_may_be_the_product_of_two_sizes():
    assert tensor_shape(("*batch", ("heads", "group"), "seq"), {"*batch": [2], "heads": 3, "group": 4, "seq": 5}) == (2, 12, 5)
    with pytest.raises(SpecError, match=r"tensors\['x'\].dims: names dims \['nope'\]"):
        _spec(tensors=(TensorArg("x", dims=(("rows", "nope"),)),))
    with pytest.raises(SpecError, match=r"a product entry is a non-empty tuple"):
        _spec(tensors=(TensorArg("x", dims=(("*batch", "rows"),)),))


def test_the_performance_model_gets_the_call_with_meta_tensors_and_the_left_out_ones_as_none():
    seen = []

    def nbytes(call):
        seen.append(call)
        return 4.0 * (call["x"].numel() + (call["bias"].numel() if call.passes("bias") else 0))

    shape = BenchShape({"rows": 8, "cols": 16}, "float32", {"alpha": 2.0}, absent=("bias",))
    spec = _spec(perf=PerfModel(bytes_moved=nbytes, shapes=(shape, BenchShape({"rows": 8, "cols": 16}, "float32", {"alpha": 2.0}))))
    left_out, passed = perf_call(spec, spec.perf.shapes[0]), perf_call(spec, spec.perf.shapes[1])
    assert left_out["x"].device.type == "meta" and left_out["x"].shape == (8, 16) and left_out["bias"] is None
    assert (spec.perf.bytes_moved(left_out), spec.perf.bytes_moved(passed)) == (512.0, 576.0)
    assert left_out["alpha"] == 2.0 and left_out.dtype is torch.float32
    assert bench_key(spec.name, "forward", shape, "direct").startswith("scaled_add/forward/cols=16,rows=8/alpha=2.0,bias=None/")
    with pytest.raises(SpecError, match=r"absent names \['x'\], not optional tensors"):
        _spec(perf=PerfModel(bytes_moved=nbytes, shapes=(BenchShape({"rows": 8, "cols": 16}, "float32", absent=("x",)),)))


def test_a_performance_function_of_dims_and_dtype_still_works_with_a_warning():
    with pytest.warns(DeprecationWarning, match=r"perf.bytes_moved takes \(dims, dtype\)"):
        spec = _spec(perf=PerfModel(bytes_moved=lambda dims, dtype: dims["rows"] * dims["cols"] * (dtype == "float32"),
                                    shapes=(BenchShape({"rows": 8, "cols": 16}, "float32", {"alpha": 2.0}),)))
    assert spec.perf.bytes_moved(perf_call(spec, spec.perf.shapes[0])) == 128
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        _spec(perf=PerfModel(bytes_moved=lambda call: 0.0))


def test_a_call_names_a_missing_argument():
    call = Call({"x": None}, {}, torch.float32)
    assert not call.passes("x")
    with pytest.raises(KeyError, match=r"no argument 'y'; its arguments: \['x'\]"):
        call["y"]
