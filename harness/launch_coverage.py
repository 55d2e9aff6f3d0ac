"""Branch coverage of the kernels at a fraction of its cost: a few distinct launches of each
specialisation measured, once each.

``harness branches`` reads which ``if`` of each Triton function a CPU run took (``harness/branches.py``).
Under Triton's interpreter a kernel runs as Python, and coverage.py's tracer (a C callback on every
line of every frame, on Python 3.11) makes every interpreted launch 3-4x slower: the kernel tests
took 938 s of worker time with ``--cov`` against 257 s without, most of a CI run. The report needs
none of that tracing outside the kernels, nor in a launch that repeats one already measured: the
same kernel with the same arguments (tensors' shapes, strides and dtypes, the values of integer
and boolean tensors, which is where data can steer a kernel's control flow, every scalar and
constexpr) on the same grid runs the same lines. A determinism check, a shrink step or a
benchmark's repetitions repeat launches; about half the interpreted time is such repeats.

Nor does the report need every distinct launch. It judges the ``if``s of Triton functions, and of
the 120 there, 119 test constexprs, dtypes or module constants, and one (``dlrm_embedding``'s
``if (p == 0) | (row != prev)``) loaded indices: the ways an ``if`` goes are fixed by the
launch's specialisation (its function, constexprs, tensors' dtypes, integer and boolean tensors'
values). Sizes and strides only decide whether loops run, and so whether an ``if`` inside one is
reached at all; a few launches of each specialisation with different sizes reach them. So at
most ``LAUNCHES_PER_SPECIALISATION`` distinct launches of a specialisation are measured. A branch
that the report then calls unreached, where a plain ``--cov`` run reaches it, would be a
specialisation whose first launches all skip a loop; the report was the same both ways when
this was built (``git log`` of this file).

``pytest --cov --launch-coverage`` (the harness's pytest option; the branch report's run, named
in ``.ci/run``) therefore pauses coverage, and resumes it only inside an interpreted launch whose
signature is new. Lines outside
launches are not measured: the option is for the branch report, not for a line report of the
host code.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import torch


class _Tracer(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


def _tensor_kind(value: torch.Tensor) -> tuple:
    """A tensor's dtype, and for an integer or boolean one, a digest of its values."""
    if value.dtype.is_floating_point or value.dtype.is_complex:
        return (str(value.dtype),)
    content = value.detach().cpu().contiguous().numpy().tobytes()
    return str(value.dtype), hashlib.blake2b(content, digest_size=16).hexdigest()


def _argument_key(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride())) + _tensor_kind(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_argument_key(v) for v in value)
    return repr(value)


LAUNCHES_PER_SPECIALISATION = 3


def specialisation_key(fn: Callable, constexprs: Iterable[str], args: tuple, kwargs: dict) -> tuple:
    """What fixes the ways a launch's ``if``s go (module docstring): the function, its constexprs'
    values, its tensors' dtypes, its integer and boolean tensors' values and its other scalars'
    types."""
    names = list(inspect.signature(fn).parameters)
    bound = {**dict(zip(names, args)), **{k: v for k, v in kwargs.items() if k in names}}
    constexprs = set(constexprs)
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn)),
            tuple((name, _tensor_kind(value) if isinstance(value, torch.Tensor) else
                   _argument_key(value) if name in constexprs else type(value).__name__)
                  for name, value in bound.items()))


def launch_key(fn: Callable, grid: Any, args: tuple, kwargs: dict) -> tuple:
    """What decides the lines a launch of ``fn`` runs (module docstring)."""
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", repr(fn)),
            tuple(_argument_key(a) for a in args), tuple(sorted((k, _argument_key(v)) for k, v in kwargs.items())),
            "callable" if callable(grid) else _argument_key(grid))


class OncePerLaunch:
    """Runs launches, tracing (``tracer.start()``/``stop()``) only the first of each key, and of
    those, only the first ``per_specialisation`` of each specialisation. The tracer is paused from
    construction on."""

    def __init__(self, tracer: _Tracer, per_specialisation: int = LAUNCHES_PER_SPECIALISATION):
        self.tracer = tracer
        self.per_specialisation = per_specialisation
        self.seen: set[tuple] = set()
        self.measured: Counter[tuple] = Counter()
        tracer.stop()

    def run(self, launch: Callable[[], Any], key: tuple, specialisation: Callable[[], tuple] = tuple) -> Any:
        """``specialisation`` is computed only for a launch not seen before (not on repeats)."""
        if key in self.seen:
            return launch()
        specialisation = specialisation()
        if self.measured[specialisation] >= self.per_specialisation:
            return launch()
        self.seen.add(key)
        self.measured[specialisation] += 1
        self.tracer.start()
        try:
            return launch()
        finally:
            self.tracer.stop()


def install(tracer: _Tracer) -> OncePerLaunch:
    """Wrap the interpreter's launches (``GridExecutor.__call__``, Triton 3.6-3.8) so that
    ``tracer`` runs only in the launches ``OncePerLaunch`` picks."""
    from triton.runtime import interpreter

    # The launch it wraps already runs from a frame-stack chunk of its own, whatever this wrapper's
    # frames add to the depth (``harness.device.configure_backend``, which the plugin runs first,
    # installs ``harness.frame_chunks``).
    once = OncePerLaunch(tracer)
    launch = interpreter.GridExecutor.__call__

    def measured_once(self, *args, **kwargs):
        return once.run(lambda: launch(self, *args, **kwargs), launch_key(self.fn, self.grid, args, kwargs),
                        lambda: specialisation_key(self.fn, self.constexprs, args, kwargs))

    interpreter.GridExecutor.__call__ = measured_once
    return once
