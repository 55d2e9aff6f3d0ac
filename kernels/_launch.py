"""A launch path for Triton kernels that costs a few microseconds of host time instead of tens.

``kernel[grid](*args, **meta)`` on a ``@triton.jit`` function goes through ``JITFunction.run``
on every call: it binds the arguments, builds a specialisation key (a string of every argument's
type, alignment and constexpr value), looks the compiled variant up, and then compares every
global the kernel's source reads (each ``tl.constexpr`` module constant of ``_rows``, through
``constexpr.__ne__``) with its value at compile time. That costs more host time than eager
PyTorch's whole softmax call: a little more for a kernel of three arguments, about three times as
much for the row kernels (docs/performance.md).

:func:`jit` returns a :class:`Kernel`: the same ``kernel[grid](...)`` syntax, with a dictionary
in front of Triton's. Its key is what Triton specialises on, computed from cheap Python values:

* the current device (compiled variants are loaded per device);
* each positional argument: a tensor's dtype and whether its address is 16-byte aligned; an
  integer's range (32-bit, 64-bit, unsigned 64-bit), whether it equals 1 and whether it is a
  multiple of 16; a float, a bool (with its value) or None; a host tensor descriptor's dtype,
  block shape and padding (Triton's launcher encodes its tensor map at every launch);
* the keyword arguments (constexprs and launch options such as ``num_warps``), as given, with
  their types (Triton compiles ``1``, ``1.0`` and ``True`` apart). A call that passes a runtime
  argument by keyword, or a constexpr by position, is never cached.

That key is at least as fine as Triton's own (a variant is never reused for arguments that Triton
would compile differently), so a hit can launch the compiled variant directly, as
``CompiledKernel.__getitem__`` does: ``run(grid, stream, function, metadata, hooks, *args)``. A
miss, or an argument of another kind, takes Triton's own path, which
compiles where needed; the variant it returns is then remembered. So do Triton's debug mode, its instrumentation, a stages-inspection hook, a
kernel's pre-run hooks and launch hooks: what changes a variant or watches a launch. This is the
"libentry" idea of FlagGems (``flag_gems/utils/libentry.py``): a
per-kernel cache keyed on the arguments' specialisation, in front of the JIT.

What the direct path does not repeat is Triton's check that the globals a kernel reads have not
changed since it was compiled: these kernels' globals are module constants. A script that rebinds
one (a tuning sweep) must call :meth:`Kernel.forget` on the kernels that read it.

An op can go further with :meth:`Kernel.bind`: its own plan per call signature (shapes, strides,
dtypes, alignment, options: everything that fixes the grid, the sizes and strides passed and
Triton's specialisation) holds a :class:`Launcher` that takes only the call's tensors and scalars,
with no key computed at launch, which takes more than half of a small call's host time off
(layer_norm at 4x64: docs/performance.md). The op's key is its promise that the arguments
specialise alike; ``HARNESS_CHECK_LAUNCH=1`` checks the promise on every launch (the GPU
verification runs set it).

Under the interpreter (``TRITON_INTERPRET=1``) there is nothing to save and no compiled variant
to call: every launch takes Triton's path. ``HARNESS_TRITON_LAUNCH=jit`` forces that path on a GPU
too (to compare the two, or to rule this module out).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch
import triton
from torch import Tensor

from harness.validate import interpreting

try:
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
except ImportError:  # a Triton without host tensor descriptors: no argument is one
    _TensorDescriptor = None


class _NotCached(Exception):
    """An argument whose specialisation this module does not model (Triton's path handles it)."""


def launch_key(args: tuple) -> tuple:
    """The part of Triton's specialisation that positional ``args`` decide, as one flat tuple: a
    tensor adds its dtype and its 16-byte alignment, an integer a code of its range, of being 1 and
    of being a multiple of 16, a bool itself, a float the type ``float``, None itself, a host
    tensor descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``) its class, then its
    dtype, block shape and padding. (A tensor's dtype is always followed by one alignment, and a
    descriptor's by a tuple, so the flat form is unambiguous.) One loop, no call per argument:
    this runs on every launch. Raises ``_NotCached`` for any other kind of argument."""
    key = []
    add = key.append
    for arg in args:
        kind = type(arg)
        if kind is int:
            size = 0 if -0x80000000 <= arg <= 0x7FFFFFFF else 1 if -(2**63) <= arg < 2**63 else 2
            add(size * 4 + (arg == 1) * 2 + (arg & 15 == 0))
        elif kind is Tensor or isinstance(arg, Tensor):
            add(arg.dtype)
            add(arg.data_ptr() & 15 == 0)
        elif kind is float:
            add(float)
        elif kind is bool:
            add((bool, arg))
        elif arg is None:
            add(None)
        elif kind is _TensorDescriptor:  # Triton specialises a descriptor on its dtype and block shape
            add(_TensorDescriptor)
            add(arg.base.dtype)
            add(tuple(arg.block_shape))
            add(arg.padding)
        else:
            raise _NotCached(kind)
    return tuple(key)


def _direct_launch_supported() -> bool:
    if interpreting() or os.environ.get("HARNESS_TRITON_LAUNCH") == "jit":
        return False
    from triton.compiler.compiler import CompiledKernel

    return all(hasattr(CompiledKernel, name) for name in ("run", "launch_metadata", "_init_handles"))


def _hooked(hook: object) -> bool:
    """Whether a launch hook is installed: a function (older Triton), or a non-empty HookChain."""
    return hook is not None and bool(getattr(hook, "calls", True))


class Kernel:
    """A ``@triton.jit`` function with a cached launch path (module docstring).

    ``kernel[grid](*args, **meta)`` launches; every other attribute (``warmup``, ``fn``, ...) is the
    JIT function's.
    """

    def __init__(self, fn: triton.runtime.JITFunction):
        self.fn = fn
        self._cache: dict[tuple, tuple] = {}
        self._direct: bool | None = None  # decided at the first launch: the backend is chosen by then
        self._knobs = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return f"Kernel({self.fn.__name__})"

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., object]:
        return lambda *args, **meta: self._launch(grid, args, meta)

    def forget(self) -> None:
        """Drop the remembered variants (after a global the kernel reads was rebound)."""
        self._cache.clear()

    def _bind_runtime(self, knobs: Any, current_device: Callable[[], int], current_stream: Callable[[int], int]) -> None:
        """Take the direct path from now on, with Triton's knobs (``triton.knobs``) and its
        driver's current device and stream (a test passes stand-ins)."""
        params = self.fn.params
        self._params = [(p.name, p.default) for p in params]
        self._runtime_names = {p.name for p in params if not p.is_constexpr}
        # positional arguments from here on would be constexprs, whose values the key lacks
        self._first_constexpr = next((i for i, p in enumerate(params) if p.is_constexpr), len(params))
        self._knobs, self._device, self._stream = knobs, current_device, current_stream
        self._direct = True

    def _needs_triton(self, grid: object, args: tuple, meta: dict) -> bool:
        """Whether this launch must take Triton's path (module docstring)."""
        runtime, compilation = self._knobs.runtime, self._knobs.compilation
        return bool(
            callable(grid) or len(args) > self._first_constexpr or "debug" in meta
            or _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook) or runtime.debug
            or getattr(runtime, "add_stages_inspection_hook", None) is not None
            or getattr(compilation, "instrumentation_mode", "") or getattr(self.fn, "pre_run_hooks", None)
        )

    def _key(self, grid: object, args: tuple, meta: dict) -> tuple | None:
        """This launch's key in the variant cache (module docstring), or None where it must take
        Triton's path: a launch that needs Triton, an argument or keyword this module does not
        model, or a runtime argument passed by keyword (its value would be in the key)."""
        if self._needs_triton(grid, args, meta) or not self._runtime_names.isdisjoint(meta):
            return None
        try:
            key = (self._device(), launch_key(args), tuple(meta.items()), tuple(map(type, meta.values())))
            hash(key)
        except (_NotCached, TypeError):  # TypeError: an unhashable keyword value
            return None
        return key

    def _remember(self, key: tuple, compiled: Any, positional: int, meta: dict) -> tuple:
        """Cache what launching ``compiled`` directly takes: its launcher, function and metadata,
        and the values of the parameters after the ``positional`` arguments (the constexprs)."""
        compiled._init_handles()
        tail = tuple(meta.get(name, default) for name, default in self._params[positional:])
        entry = self._cache[key] = (compiled.run, compiled.function, compiled.packed_metadata, tail, compiled)
        return entry

    def _launch(self, grid: tuple[int, ...], args: tuple, meta: dict) -> object:
        if self._direct is None:
            self._decide()
        key = self._key(grid, args, meta) if self._direct else None
        if key is None:
            return self.fn[grid](*args, **meta)
        entry = self._cache.get(key)
        if entry is None:  # Triton's path compiles and launches; the variant it returns is remembered
            compiled = self.fn[grid](*args, **meta)
            self._remember(key, compiled, len(args), meta)
            return compiled
        run, function, metadata, tail, _ = entry
        size = len(grid)
        run(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1, self._stream(key[0]), function,
            metadata, None, None, None, *args, *tail)
        return None

    def _decide(self) -> None:
        """Choose the path at the first launch: the backend is chosen by then."""
        self._direct = _direct_launch_supported()
        if self._direct:
            from triton import knobs
            from triton.runtime import driver

            self._bind_runtime(knobs, driver.active.get_current_device, driver.active.get_current_stream)

    # -- bound launches: an op's plan holds one for each kernel it launches ----------------------

    def bind(self, grid: tuple[int, ...], args: tuple, meta: dict, *, runtime: int) -> Callable[..., object]:
        """``kernel[grid](*args, **meta)`` as a launcher for later calls: ``bind(...)(*head)``
        launches ``kernel[grid](*head, *args[runtime:], **meta)``.

        The first ``runtime`` arguments change from call to call (tensors, eps, a seed); the rest
        (sizes, strides) are fixed into the launcher. An op keys its plans on everything that
        decides the fixed arguments and Triton's specialisation of the others (shapes, strides,
        dtypes, 16-byte alignment, an integer's range), builds a launcher once per key and then
        launches through it with no key of its own: the op's key is its promise that every
        ``head`` specialises as ``args[:runtime]`` does. With ``HARNESS_CHECK_LAUNCH=1`` (read
        here) the launcher verifies that promise on every call (the GPU test runs set it).

        Compiles now (``warmup``, which does not launch). Where the direct path does not apply
        (the interpreter, Triton's debug mode or instrumentation, hooks installed), the launcher
        takes Triton's path on every call, as does a direct launcher that finds launch hooks
        installed after it was built.
        """
        fixed = tuple(args[runtime:])
        # Compile, load and launch on the arguments' device, whichever is current now.
        tensor = next((arg for arg in args if isinstance(arg, Tensor)), None)
        on_device = (torch.cuda.device(tensor.device) if tensor is not None and tensor.device.type == "cuda"
                     else contextlib.nullcontext())
        with on_device:
            through_triton = _TritonLaunch(self.fn, grid, fixed, meta)
            if self._direct is None:
                self._decide()
            key = self._key(grid, args, meta) if self._direct else None
            if key is None:
                launcher: Callable[..., object] = through_triton
            else:
                entry = self._cache.get(key)
                if entry is None:
                    entry = self._remember(key, self.fn.warmup(*args, grid=grid, **meta), len(args), meta)
                run, function, metadata, tail, compiled = entry
                launcher = Launcher(run, (*grid, 1, 1)[:3], function, metadata, fixed + tail, key[0], self._stream,
                                    self._knobs.runtime, through_triton, compiled)
        if os.environ.get("HARNESS_CHECK_LAUNCH", "0") not in ("", "0"):
            return _CheckedLauncher(self, launcher, args[:runtime])
        return launcher


class Launcher:
    """One compiled variant at one grid, with its fixed arguments (:meth:`Kernel.bind`):
    ``launcher(*head)`` launches it on the current stream of its device. ``compiled``, ``grid``,
    ``function`` and ``tail`` (the arguments after the head) describe the launch to
    ``kernels._native``, which records it for C++."""

    __slots__ = ("_run", "_x", "_y", "_z", "_function", "_metadata", "_tail", "_device", "_stream",
                 "_runtime", "_triton", "_switch", "compiled")

    def __init__(self, run: Callable, grid: tuple[int, int, int], function: object, metadata: object, tail: tuple,
                 device: int, stream: Callable[[int], int], runtime: Any, through_triton: Callable[..., object],
                 compiled: Any = None):
        self._run, (self._x, self._y, self._z), self._function, self._metadata = run, grid, function, metadata
        self._tail, self._device, self._stream, self._runtime = tail, device, stream, runtime
        self._triton = through_triton
        self.compiled = compiled
        # Triton launches in the current device's context: with several GPUs, make ours current
        self._switch = torch.cuda.device_count() > 1

    @property
    def grid(self) -> tuple[int, int, int]:
        return self._x, self._y, self._z

    @property
    def function(self) -> object:
        return self._function

    @property
    def tail(self) -> tuple:
        return self._tail

    def __call__(self, *head: object) -> None:
        runtime = self._runtime
        if _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook):
            self._triton(*head)  # a profiler watches launches: let Triton call its hooks
        elif self._switch:
            with torch.cuda.device(self._device):
                self._run(self._x, self._y, self._z, self._stream(self._device), self._function, self._metadata,
                          None, None, None, *head, *self._tail)
        else:
            self._run(self._x, self._y, self._z, self._stream(self._device), self._function, self._metadata,
                      None, None, None, *head, *self._tail)


class _TritonLaunch:
    """A bound launch through Triton's own path, in the context a launch needs: on a GPU, the
    current device (where several are visible; bound on the device that is current then); under
    the interpreter, numpy's floating-point warnings silenced, because the kernels rely on IEEE
    semantics (``-inf - -inf`` is NaN, ``exp(-inf)`` is 0) exactly as the GPU does."""

    __slots__ = ("_fn", "_grid", "_fixed", "_meta", "_context")

    def __init__(self, fn: Any, grid: tuple[int, ...], fixed: tuple, meta: dict):
        self._fn, self._grid, self._fixed, self._meta = fn, grid, fixed, meta
        if interpreting():
            self._context = _quiet_numpy
        elif torch.cuda.device_count() > 1:
            device = torch.cuda.current_device()
            self._context = lambda: torch.cuda.device(device)
        else:
            self._context = contextlib.nullcontext

    def __call__(self, *head: object) -> object:
        with self._context():
            return self._fn[self._grid](*head, *self._fixed, **self._meta)


@contextlib.contextmanager
def _quiet_numpy():
    import numpy as np

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


PLAN_LIMIT = 1024
_PLAN_TABLES: list = []  # dicts, and the native path's C++ tables (anything with clear())


def plan_table() -> dict:
    """A new table of an op's plans: what a call signature (layouts, dtypes, options) decides,
    launchers bound included, worked out at its first call."""
    table: dict = {}
    _PLAN_TABLES.append(table)
    return table


def register_table(table: object) -> None:
    """Add a table kept elsewhere (the native path's C++ ones: anything with ``clear()``) to those
    :func:`forget_plans` empties."""
    _PLAN_TABLES.append(table)


def forget_plans() -> None:
    """Empty every plan table: after a sweep or a test changes a knob that plans were built from
    (a tile limit, a prefetch rule), or rebinds a global that kernels read."""
    for table in _PLAN_TABLES:
        table.clear()


def remember(plans: dict, key: object, plan: object) -> object:
    """Store ``plan`` under ``key`` in an op's plan table and return it. A table that reaches
    PLAN_LIMIT entries (a workload of ever new shapes) starts afresh rather than grow."""
    if len(plans) >= PLAN_LIMIT:
        plans.clear()
    plans[key] = plan
    return plan


class LaunchPromiseBroken(AssertionError):
    """A bound launcher got arguments that Triton specialises otherwise than those it was built
    for: the plan key of the op that holds it misses something (:meth:`Kernel.bind`)."""


def specialisation(args: tuple, loose: frozenset[int] = frozenset()) -> tuple:
    """Each argument's part of :func:`launch_key`, as one tuple per argument; an integer at a
    position in ``loose`` (a ``do_not_specialize`` parameter) keeps only its range."""
    return tuple((launch_key((arg,))[0] // 4,) if i in loose and type(arg) is int else launch_key((arg,))
                 for i, arg in enumerate(args))


class _CheckedLauncher:
    """A bound launcher that first checks the promise behind it (``HARNESS_CHECK_LAUNCH=1``)."""

    def __init__(self, kernel: Kernel, launcher: Callable[..., object], head: tuple):
        params = getattr(kernel.fn, "params", [])
        self._loose = frozenset(i for i, p in enumerate(params) if getattr(p, "do_not_specialize", False))
        self._kernel, self._launcher, self._want = kernel, launcher, specialisation(head, self._loose)

    def direct(self) -> object:
        """The launcher behind the check."""
        return self._launcher

    def __call__(self, *head: object) -> object:
        got = specialisation(head, self._loose)
        if got != self._want:
            raise LaunchPromiseBroken(
                f"{self._kernel!r}: a launcher bound for arguments specialised as {self._want} got {got}: "
                "the plan key of the op that holds it misses something"
            )
        return self._launcher(*head)


def jit(fn: Callable | None = None, **jit_options: Any) -> Kernel | Callable[[Callable], Kernel]:
    """``triton.jit`` for a kernel that Python launches (``@jit`` or ``@jit(**options)``); helpers
    that only other kernels call keep ``@triton.jit``."""
    if fn is None:
        return lambda f: Kernel(triton.jit(f, **jit_options))
    return Kernel(triton.jit(fn, **jit_options))
