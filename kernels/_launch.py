"""A launch path for Triton kernels that costs a few microseconds of host time instead of tens.

``kernel[grid](*args, **meta)`` on a ``@triton.jit`` function goes through ``JITFunction.run``
on every call: it binds the arguments, builds a specialisation key (a string of every argument's
type, alignment and constexpr value), looks the compiled variant up, and then compares every
global the kernel's source reads (each ``tl.constexpr`` module constant of ``_rows``, through
``constexpr.__ne__``) with its value at compile time. On the H200 host of
benchmarks/results/2026-11-27-h200-14 that was 13 us for a kernel of three arguments and about
30 us for the row kernels, where eager PyTorch's whole softmax call costs 10 us.

:func:`jit` returns a :class:`Kernel`: the same ``kernel[grid](...)`` syntax, with a dictionary
in front of Triton's. Its key is what Triton specialises on, computed from cheap Python values:

* the current device (compiled variants are loaded per device);
* each positional argument: a tensor's dtype and whether its address is 16-byte aligned; an
  integer's range (32-bit, 64-bit, unsigned 64-bit), whether it equals 1 and whether it is a
  multiple of 16; a float, a bool (with its value) or None;
* the keyword arguments (constexprs and launch options such as ``num_warps``), as given, with
  their types (Triton compiles ``1``, ``1.0`` and ``True`` apart). A call that passes a runtime
  argument by keyword, or a constexpr by position, is never cached.

That key is at least as fine as Triton's own (a variant is never reused for arguments that Triton
would compile differently), so a hit can launch the compiled variant directly, as
``CompiledKernel.__getitem__`` does: ``run(grid, stream, function, metadata, hooks, *args)``. A
miss, or an argument of another kind (a tensor descriptor), takes Triton's own path, which
compiles where needed; the variant it returns is then remembered. So do Triton's debug mode, its instrumentation, a stages-inspection hook, a
kernel's pre-run hooks and launch hooks: what changes a variant or watches a launch. This is the
"libentry" idea of FlagGems (``flag_gems/utils/libentry.py``): a
per-kernel cache keyed on the arguments' specialisation, in front of the JIT.

What the direct path does not repeat is Triton's check that the globals a kernel reads have not
changed since it was compiled: these kernels' globals are module constants. A script that rebinds
one (a tuning sweep) must call :meth:`Kernel.forget` on the kernels that read it.

Under the interpreter (``TRITON_INTERPRET=1``) there is nothing to save and no compiled variant
to call: every launch takes Triton's path. ``HARNESS_TRITON_LAUNCH=jit`` forces that path on a GPU
too (to compare the two, or to rule this module out).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import triton
from torch import Tensor

from harness.validate import interpreting


class _NotCached(Exception):
    """An argument whose specialisation this module does not model (Triton's path handles it)."""


def launch_key(args: tuple) -> tuple:
    """The part of Triton's specialisation that positional ``args`` decide, as one flat tuple: a
    tensor adds its dtype and its 16-byte alignment, an integer a code of its range, of being 1 and
    of being a multiple of 16, a bool itself, a float the type ``float``, None itself. (A dtype is
    always followed by one alignment, so the flat form is unambiguous.) One loop, no call per
    argument: this runs on every launch. Raises ``_NotCached`` for any other kind of argument."""
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

    def _launch(self, grid: tuple[int, ...], args: tuple, meta: dict) -> object:
        if self._direct is None:
            self._direct = _direct_launch_supported()
            if self._direct:
                from triton import knobs
                from triton.runtime import driver

                self._bind_runtime(knobs, driver.active.get_current_device, driver.active.get_current_stream)
        if not self._direct or self._needs_triton(grid, args, meta):
            return self.fn[grid](*args, **meta)
        device = self._device()
        try:
            key = (device, launch_key(args), tuple(meta.items()), tuple(map(type, meta.values())))
            entry = self._cache.get(key)
        except (_NotCached, TypeError):  # TypeError: an unhashable keyword value
            return self.fn[grid](*args, **meta)
        if entry is None:
            compiled = self.fn[grid](*args, **meta)
            if not self._runtime_names.isdisjoint(meta):
                return compiled  # a runtime argument by keyword: its value is in the key; not cached
            tail = tuple(meta.get(name, default) for name, default in self._params[len(args):])
            self._cache[key] = (compiled.run, compiled.function, compiled.packed_metadata, tail)
            return compiled
        run, function, metadata, tail = entry
        size = len(grid)
        run(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1, self._stream(device), function,
            metadata, None, None, None, *args, *tail)
        return None


def jit(fn: Callable | None = None, **jit_options: Any) -> Kernel | Callable[[Callable], Kernel]:
    """``triton.jit`` for a kernel that Python launches (``@jit`` or ``@jit(**options)``); helpers
    that only other kernels call keep ``@triton.jit``."""
    if fn is None:
        return lambda f: Kernel(triton.jit(f, **jit_options))
    return Kernel(triton.jit(fn, **jit_options))
