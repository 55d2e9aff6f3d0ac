"""The graph checks (harness/graph_checks.py): what they record, and that each fails what it must.
The planted faults of tests/faults/graph_faults.py run in tests/test_faults.py."""

import dataclasses

import pytest
import torch

from harness.device import current_device
from harness.graph_checks import _recorded_calls
from harness.registry import load_specs
from harness.runner import CheckFailure, PropertyRun
from harness.strategies import tiling_examples
from kernels import softmax as production

# every row length the softmax spec draws (its GPU maximum is 37000 columns)
_ONES = {n: 1.0 for n in range(1 << 16)}


def _pins_its_size(x):
    """Correct values, but the traced code looks the row length up in a dict: Dynamo must make
    the size a constant, and the graph serves that size alone."""
    return production.softmax(x) * _ONES[x.shape[-1]]


def _run(spec, fn, check, max_examples, shrink=True):
    spec = dataclasses.replace(spec, implementations={"subject": fn})
    return PropertyRun(spec, "subject", "float32", check, current_device(), max_examples=max_examples, shrink=shrink)


def test_a_graph_pinned_to_its_sizes_fails_compile_naming_the_size():
    # unshrunk: each shrink step compiles again, and the first failing case names its size as well
    with pytest.raises(CheckFailure) as info:
        _run(load_specs()["softmax"], _pins_its_size, "compile", 6, shrink=False).run()
    report = str(info.value)
    assert "compiled for these sizes only" in report and "size()" in report, report


def test_the_same_kernel_without_the_lookup_passes_compile():
    _run(load_specs()["softmax"], production.softmax, "compile", 6).run()


def test_declaring_static_shapes_accepts_a_pinned_graph():
    spec = dataclasses.replace(load_specs()["softmax"], dynamic_shapes=False)
    _run(spec, _pins_its_size, "compile", 2).run()  # two cases: each new size compiles for seconds


def test_the_compile_check_compiles_with_the_compiled_graph_caches_off(monkeypatch):
    """A cache hit evaluates the cached graph's guards in the new call's ShapeEnv and can pin a size
    the traced code never asked for (``graph_checks._compiled_call``): every compile of the check
    runs with Inductor's FX graph cache and AOTAutograd's cache off, and a compile outside it with
    whatever the user configured."""
    import torch._functorch.config
    import torch._inductor.config

    from harness import graph_checks

    seen = []

    def recording(gm, example_inputs):
        seen.append((torch._inductor.config.fx_graph_cache, torch._functorch.config.enable_autograd_cache))
        return gm.forward

    def softmax(x):  # a function of its own: the check keeps one compiled entry per function
        return production.softmax(x)

    monkeypatch.setattr(graph_checks, "compile_backend", lambda device: recording)
    # on, whatever this environment says, so that the check's own switch is what is tested (the
    # configs' own patch: monkeypatch's undo deletes a torch config entry instead of restoring it)
    with torch._inductor.config.patch(fx_graph_cache=True), torch._functorch.config.patch(enable_autograd_cache=True):
        _run(load_specs()["softmax"], softmax, "compile", 2).run()
        after = (torch._inductor.config.fx_graph_cache, torch._functorch.config.enable_autograd_cache)
    assert seen and set(seen) == {(False, False)}, seen
    assert after == (True, True)


def test_a_call_that_makes_no_custom_op_fails_opcheck():
    spec = load_specs()["softmax"]
    with pytest.raises(CheckFailure) as info:
        _run(spec, spec.reference, "opcheck", 2).run()
    assert "the call made no custom op" in str(info.value)


def test_opcheck_records_the_forward_and_the_backward_op_each_with_its_own_arguments():
    spec = load_specs()["layer_norm"]
    case = tiling_examples(spec, "float32", False, 0)[0]
    calls = _recorded_calls(spec, spec.implementations["triton"].load(), case, current_device())
    names = [func.name() for func, _, _, _ in calls]
    assert names == ["fkh::layer_norm", "fkh::layer_norm", "fkh::norm_backward"], names
    no_grad_args, forward_args, backward_args = calls[0][1], calls[1][1], calls[2][1]
    assert not no_grad_args[0].requires_grad  # the call without a graph
    assert forward_args[0].requires_grad  # the forward's autograd formula is checked
    assert not any(isinstance(a, torch.Tensor) and a.requires_grad for a in backward_args)


def test_an_implementation_of_pytorch_ops_alone_skips_opcheck_saying_so():
    from harness import Implementation
    from harness.runner import skip_reason

    spec = load_specs()["softmax"]
    eager = dataclasses.replace(spec, implementations={"composite": Implementation(load=lambda: spec.reference, custom_ops=False)})
    assert "no custom op to check" in skip_reason(eager, "composite", current_device(), "opcheck")
    assert skip_reason(eager, "composite", current_device(), "compile") is None


def _detaches_when_compiled(x):
    """Right values, but the compiled call drops autograd: its output requires no grad."""
    if torch.compiler.is_compiling():
        x = x.detach()
    return production.softmax(x)


def test_a_compiled_call_that_loses_its_gradients_fails_compile():
    with pytest.raises(CheckFailure) as info:
        _run(load_specs()["softmax"], _detaches_when_compiled, "compile", 3).run()
    assert "does not require grad" in str(info.value), str(info.value)


def test_the_recorder_marks_a_call_whose_outputs_hold_a_nan():
    """opcheck skips its NaN-blind AOT-dispatch test for such a call (``_opcheck_tests``)."""
    from harness.graph_checks import _RecordCustomOps, _opcheck_tests
    from harness.validate import custom_ops_routed

    x = torch.zeros(2, 8, device=current_device())
    x[1] = float("-inf")  # softmax of a row of -inf is NaN, as eager's is
    recorder = _RecordCustomOps()
    with custom_ops_routed(), torch.no_grad(), recorder:
        production.softmax(x[:1])
        production.softmax(x)
    assert [(func.name(), nan) for func, _, _, _, nan in recorder.calls] == [("fkh::softmax", False),
                                                                          ("fkh::softmax", True)]
    assert "test_aot_dispatch_dynamic" in _opcheck_tests(False)
    assert "test_aot_dispatch_dynamic" not in _opcheck_tests(True)


def test_a_property_run_without_shrinking_keeps_every_other_phase_of_the_profile():
    from hypothesis import Phase, settings

    spec = load_specs()["softmax"]
    plain = PropertyRun(spec, "triton", "float32", "compile", current_device())._settings(None)
    unshrunk = PropertyRun(spec, "triton", "float32", "compile", current_device(), shrink=False)._settings(None)
    assert Phase.shrink in plain.phases and Phase.shrink not in unshrunk.phases
    assert set(unshrunk.phases) == set(settings.default.phases) - {Phase.shrink}
    assert unshrunk.max_examples == plain.max_examples
