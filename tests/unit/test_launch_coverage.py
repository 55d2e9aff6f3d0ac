"""harness.launch_coverage: coverage runs in the first launches of each specialisation, once per distinct launch."""

import pytest
import torch
import triton
import triton.language as tl

from harness import launch_coverage
from harness.validate import interpreting


class Tracer:
    """Stands in for coverage.Coverage: counts starts, and whether it is running."""

    def __init__(self):
        self.running, self.starts = True, 0

    def start(self):
        assert not self.running, "started twice"
        self.running, self.starts = True, self.starts + 1

    def stop(self):
        self.running = False


def test_each_key_is_traced_once_and_the_tracer_is_paused_between():
    tracer = Tracer()
    once = launch_coverage.OncePerLaunch(tracer)
    assert not tracer.running, "paused from the start"
    seen_running = []
    launch = lambda: seen_running.append(tracer.running)  # noqa: E731
    for key in ("a", "a", "b", "a", "b"):
        once.run(launch, (key,))
    assert seen_running == [True, False, True, False, False] and tracer.starts == 2 and not tracer.running
    with pytest.raises(ZeroDivisionError):  # a launch that raises still pauses the tracer
        once.run(lambda: 1 / 0, ("c",))
    assert not tracer.running


def test_a_specialisation_is_traced_in_its_first_distinct_launches_only():
    tracer = Tracer()
    once = launch_coverage.OncePerLaunch(tracer, per_specialisation=2)
    for size in (8, 8, 9, 10, 11):  # the same specialisation, four distinct launches
        once.run(lambda: None, ("k", size), lambda: ("spec",))
    once.run(lambda: None, ("k", 12), lambda: ("other spec",))
    assert tracer.starts == 3


def test_a_specialisation_is_the_function_its_constexprs_and_its_tensors_dtypes():
    def kernel(x_ptr, idx_ptr, n, scale, BLOCK):
        pass

    def key(x, idx, n, scale, block):
        return launch_coverage.specialisation_key(kernel, ["BLOCK"], (x, idx, n), {"scale": scale, "BLOCK": block})

    x, idx = torch.randn(4, 8), torch.tensor([0, 3])
    assert key(x, idx, 8, 0.5, 16) == key(torch.randn(9), idx.clone(), 9, 2.0, 16)  # sizes, float values
    assert key(x, idx, 8, 0.5, 16) != key(x, idx, 8, 0.5, 32)  # a constexpr
    assert key(x, idx, 8, 0.5, 16) != key(x.half(), idx, 8, 0.5, 16)  # a dtype
    assert key(x, idx, 8, 0.5, 16) != key(x, torch.tensor([0, 2]), 8, 0.5, 16)  # indices' values
    assert key(x, idx, 8, 0.5, 16) != key(x, idx, 8, 1, 16)  # a scalar's type


def _key(*args, grid=(4,), **kwargs):
    return launch_coverage.launch_key(_key, grid, args, kwargs)


def test_the_key_holds_what_can_steer_a_kernel_s_lines():
    x = torch.randn(4, 8)
    # float values cannot change the lines a launch runs; shapes, strides, dtypes and scalars can
    assert _key(x, 8, BLOCK=16) == _key(torch.randn(4, 8), 8, BLOCK=16)
    assert _key(x, 8, BLOCK=16) != _key(x, 8, BLOCK=32)
    assert _key(x, 8) != _key(x, 9)
    assert _key(x) != _key(torch.randn(8, 4)) and _key(x) != _key(x.t()) and _key(x) != _key(x.double())
    assert _key(x, grid=(4,)) != _key(x, grid=(8,))
    # integer and boolean tensors (offsets, indices, masks) can steer a loop or an if: their values count
    offsets = torch.tensor([0, 2, 2, 5])
    assert _key(offsets) == _key(offsets.clone()) and _key(offsets) != _key(torch.tensor([0, 2, 3, 5]))
    mask = torch.tensor([True, False])
    assert _key(mask) != _key(~mask)


@triton.jit
def _scale(x_ptr, n, HALF: tl.constexpr):
    offs = tl.arange(0, 8)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if HALF:
        x = x * 0.5
    tl.store(x_ptr + offs, x, mask=offs < n)


@pytest.mark.skipif(not interpreting(), reason="measures the interpreter's launches; a GPU runs compiled kernels")
def test_the_interpreter_s_launches_are_traced_once_per_signature(monkeypatch):
    from triton.runtime import interpreter

    monkeypatch.setattr(interpreter.GridExecutor, "__call__", interpreter.GridExecutor.__call__)  # undone after
    tracer = Tracer()
    launch_coverage.install(tracer)
    x = torch.ones(8)
    for n, half in ((8, True), (8, True), (8, False), (7, True), (8, True)):
        _scale[(1,)](x, n, HALF=half)
    assert tracer.starts == 3 and not tracer.running
    assert x[0].item() == 0.5 ** 4  # every launch ran, traced or not
