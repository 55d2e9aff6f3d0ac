"""A call's whole host path in C++: programs of allocations and compiled Triton launches, run by a
C++ autograd node (source: ``kernels/native/native.cpp``).

Why. A Python ``torch.autograd.Function`` costs about as much host time as eager PyTorch's whole
forward+backward of a small op before it does any work (at a LayerNorm of 4 x 64, a Function
that does nothing costs what eager's whole LayerNorm does), and the Python of its backward runs
cold on autograd's device thread. What eager does in C++ (a node in the graph, allocations,
launches) must be done in C++ to cost what eager costs; docs/performance.md has the per-call
figures of the ops this path serves, with it and without it.

The saved tensors and output gradients a backward reads are checked against the layouts the
kernels were compiled for, and copied into them when autograd or a saved-tensor hook
(``torch.autograd.graph.save_on_cpu``) hands back another. Gradients computed under
``create_graph=True`` carry a node that raises if differentiated, as ``once_differentiable``'s do.

How. An op describes one call signature (shapes, strides, dtypes, alignment, which inputs need
gradients) as two :class:`Builder` recordings, made once from the launchers that
``kernels._launch.Kernel.bind`` compiled for it:

* the forward: its given tensors (the op's inputs, None where absent), its allocations, its
  launches (every kernel argument a given or allocated slot, a per-call float or int, or a
  constant), the slots it returns and the slots its backward reads;
* the backward: given what the forward saved and one gradient per forward output (in the layout
  the kernels were compiled for; the node copies a gradient of another layout into it), its
  allocations and launches, and per forward input the slot of its gradient (or a row of one).

:func:`program` turns the pair into a C++ ``Program``. A call is then one C++ function:
:func:`apply` (records the backward node, an autograd node of the kind eager's generated code
makes) or :func:`run` (no graph), each allocating, packing the kernels' arguments and calling
``cuLaunchKernel`` on the current stream. An op's :class:`Entry` finds the program of a call
signature seen before in C++, ahead of the entry point's Python checks: such a call costs one
Python line (whether Dynamo traces it or the harness routes it to the custom op) and the C++,
entered as a builtin function (Python's fast calling convention, no pybind11 dispatch) that asks
itself whether the native path is on.

The launch is the one Triton's launcher makes: the kernel's non-constexpr arguments in order,
then its scratch pointers (null: a kernel that needs scratch memory, several CTAs, PDL or a
cooperative grid is not recorded, and keeps Triton's path). A host tensor descriptor argument
(:class:`TensorMap`) is expanded as Triton's launcher expands it: its tensor map, encoded once by
Triton's own encoder at recording and pointed at the call's tensor at every launch
(``cuTensorMapReplaceAddress``), then its shape and strides.

What ``HARNESS_CHECK_LAUNCH=1`` checks on the Python path (that a launch's arguments specialise
as those it was compiled for) holds here by construction, and is checked where it can fail: sizes
and strides are constants of the program (an op's key covers them), a per-call int must be a
``do_not_specialize`` parameter or take its range from the key, a float never specialises, and
every tensor argument's 16-byte alignment is checked in C++ at every launch (a misaligned one
raises, naming the kernel and the argument).

Not served: forward-mode AD (a call with a dual tensor raises: there is no tangent formula, and
an output without its tangent would be silently wrong); compiled autograd
(``torch._dynamo.compiled_autograd``) cannot trace the backward node, and stops with "compiled_args
not implemented: fkh::NativeBackward" (as it stopped on the ``torch::autograd::Function`` node
before it). ``HARNESS_NATIVE=0`` takes the Python path for both.

The native path is on where the extension can be built and loaded: a CUDA machine (it needs a
C++ compiler and torch's headers, no CUDA toolkit; ``kernels/cuda/_build.py`` caches the build).
``HARNESS_NATIVE=0`` turns it off (to compare, or to rule it out). Under the interpreter it is
off: there is no compiled kernel to launch.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from harness.validate import interpreting
from kernels import _launch
from kernels.cuda import _build

SOURCE = _build.ExtensionSource(name="fkh_native", cpp_files=("native/native.cpp",))
ENV = "HARNESS_NATIVE"

# Parameter kinds (enum Kind in native.cpp)
TENSOR, CONST_I32, CONST_I64, CONST_U64, CONST_F32, CONST_F64 = range(6)
FLOAT_F32, FLOAT_F64, INT_I32, INT_I64, INT_U64, NULL, CONST_I8, TENSOR_MAP = range(6, 14)
_CONST = {"i1": CONST_I8, "i8": CONST_I8, "i32": CONST_I32, "i64": CONST_I64, "u64": CONST_U64, "fp32": CONST_F32,
          "fp64": CONST_F64}
_FLOAT_ARG = {"fp32": FLOAT_F32, "fp64": FLOAT_F64}
_INT_ARG = {"i32": INT_I32, "i64": INT_I64, "u64": INT_U64}

_STATE: list = []  # [module or None, Triton's runtime knobs or None], decided once per process; the
# entries' C++ functions read this list object (tests switch the path off in place: _STATE[:] = [None])


class Unsupported(Exception):
    """A launch the native path does not model (it keeps Triton's path)."""


# What an op's table of programs holds for a call signature that the native path does not serve
# (a layout the op copies, an empty tensor, a launch :class:`Unsupported`): the op takes its
# Python path.
NOT_SERVED = object()


def enabled() -> bool:
    """Whether calls may take the native path here: not under the interpreter, not turned off by
    ``HARNESS_NATIVE=0``, the extension built and loaded (a failed build warns once), and no
    Triton launch hook installed (a profiler such as Proton watches launches through them, and
    only Triton's own launcher calls them).

    An op's Python path asks it on every call it takes; an :class:`Entry`'s C++ function asks the
    same in C++ (``native_on`` in native.cpp), so a call an entry serves does not ask it here."""
    if not _STATE:
        _STATE.append(_load())
        _STATE.append(_triton_runtime_knobs() if _STATE[0] is not None else None)
    if _STATE[0] is None:
        return False
    runtime = _STATE[1]
    return runtime is None or not (_launch._hooked(runtime.launch_enter_hook) or _launch._hooked(runtime.launch_exit_hook))


def _triton_runtime_knobs() -> Any:
    try:
        from triton import knobs
    except ImportError:  # an older Triton: no hooks to watch for
        return None
    return knobs.runtime


def _load() -> Any:
    setting = os.environ.get(ENV, "1").strip().lower()
    if setting not in ("0", "1", "false", "true", ""):
        raise ValueError(f"{ENV}={setting!r}: expected 1 or 0")
    if setting in ("0", "false") or interpreting() or _build.unavailable_reason() is not None:
        return None
    try:
        return _build.load(SOURCE)
    except Exception as exc:  # noqa: BLE001 - any build failure leaves Triton's path in place
        warnings.warn(f"the native launch path is off: building {SOURCE.name} failed ({exc})", stacklevel=3)
        return None


def module() -> Any:
    """The loaded extension; RuntimeError where it is not loaded (:func:`enabled` says why)."""
    if not _STATE:
        enabled()
    if _STATE[0] is None:
        raise RuntimeError(f"the native launch path is off here ({ENV}, the interpreter, no CUDA, or a failed build)")
    return _STATE[0]


class Slot:
    """A tensor of a program: given to it, or allocated by it."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"Slot({self.index})"


class Arg:
    """A per-call scalar: the call's float (``kind='float'``) or int (``'int'``) number ``index``."""

    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int):
        self.kind, self.index = kind, index


class TensorMap:
    """A host tensor descriptor argument (``triton.tools.tensor_descriptor.TensorDescriptor``) over
    slot ``slot``: ``descriptor`` is the one the launch was bound with, over an example tensor of
    the slot's layout. The launch record encodes its tensor map once, as Triton's launcher does
    (:func:`_tensor_map_words`); the program copies it at every launch and points it at the slot's
    tensor (``cuTensorMapReplaceAddress``). Shape and strides are the example's, which the op's
    key fixes."""

    __slots__ = ("slot", "descriptor")

    def __init__(self, slot: Slot, descriptor: Any):
        self.slot, self.descriptor = slot, descriptor

    def __repr__(self) -> str:
        return f"TensorMap({self.slot!r})"


class Builder:
    """The recording of one direction of a call (module docstring): ``given`` slots first, then
    one per :meth:`empty`."""

    def __init__(self, given: int, like: Sequence[torch.Tensor | None] = ()):
        """``given`` slots; ``like``: an example tensor (or None) per given slot, whose dtype and
        layout a backward that reads it from the saved tensors expects."""
        self.given = tuple(Slot(i) for i in range(given))
        self.allocs: list[tuple[list[int], torch.dtype]] = []
        self.launches: list[tuple] = []
        self.compiled: list[Any] = []  # each launch's compiled kernel (kept alive: _keep_alive)
        self._layouts: list[tuple | None] = [None if t is None else (t.dtype, list(t.shape), list(t.stride()))
                                             for t in like] + [None] * (given - len(like))

    def empty(self, sizes: Sequence[int], dtype: torch.dtype) -> Slot:
        """A new contiguous tensor, allocated on the call's device at every call."""
        sizes = [int(s) for s in sizes]
        self.allocs.append((sizes, dtype))
        strides, step = [], 1
        for size in reversed(sizes):
            strides.append(step)
            step *= max(size, 1)
        self._layouts.append((dtype, sizes, strides[::-1]))
        return Slot(len(self.given) + len(self.allocs) - 1)

    def layout(self, slot: Slot) -> tuple:
        """(dtype, sizes, strides) of a slot: an allocation's, or the example given for it."""
        layout = self._layouts[slot.index]
        if layout is None:
            raise ValueError(f"{slot!r} has no known layout: give an example tensor for it (Builder's like)")
        return layout

    @staticmethod
    def float_arg(index: int) -> Arg:
        """The call's float scalar ``index`` (a kernel argument of type fp32 or fp64)."""
        return Arg("float", index)

    @staticmethod
    def int_arg(index: int) -> Arg:
        """The call's int scalar ``index`` (a kernel argument of type i32, i64 or u64)."""
        return Arg("int", index)

    def launch(self, launcher: object, *head: object) -> None:
        """Record ``launcher(*head)``: a launcher from ``Kernel.bind``, its per-call arguments given
        as slots, :class:`Arg` scalars or constants. Raises :class:`Unsupported` where the launch
        is not one a plain ``cuLaunchKernel`` makes."""
        self.launches.append(_launch_record(launcher, head))
        self.compiled.append(_direct(launcher).compiled)


def _direct(launcher: object) -> object:
    """The launcher behind a checking wrapper (``HARNESS_CHECK_LAUNCH``), or itself."""
    return getattr(launcher, "direct", lambda: None)() or launcher


def _launch_record(launcher: object, head: tuple) -> tuple:
    launcher = _direct(launcher)
    if not isinstance(launcher, _launch.Launcher):
        raise Unsupported(f"{launcher!r} takes Triton's own launch path")
    compiled = launcher.compiled
    meta = compiled.metadata
    name = getattr(compiled, "name", None) or getattr(meta, "name", "kernel")
    for attribute, allowed in (("num_ctas", (1,)), ("launch_pdl", (False, 0)), ("launch_cooperative_grid", (False, 0)),
                               ("global_scratch_size", (0,)), ("profile_scratch_size", (0,))):
        value = getattr(meta, attribute, allowed[0])
        if value not in allowed:
            raise Unsupported(f"{name}: {attribute}={value!r}")
    types = list(compiled.src.signature.values())
    args = (*head, *launcher.tail)
    if len(types) != len(args):
        raise Unsupported(f"{name}: {len(args)} arguments for a signature of {len(types)}")
    loose = {i for i, p in enumerate(getattr(getattr(compiled.src, "fn", None), "params", ()))
             if getattr(p, "do_not_specialize", False)}
    descriptor_meta = list(getattr(meta, "tensordesc_meta", None) or ())
    params, maps = [], []
    for position, (kind, value) in enumerate(zip(types, args)):
        if kind == "constexpr":
            continue
        if isinstance(value, Arg) and value.kind == "int" and position not in loose:
            # Triton would compile another variant for a value of 1 or a multiple of 16
            raise Unsupported(f"{name}: per-call int argument {position} is not a do_not_specialize parameter")
        if isinstance(kind, str) and kind.startswith("tensordesc"):
            if not isinstance(value, TensorMap) or len(maps) >= len(descriptor_meta):
                raise Unsupported(f"{name}: descriptor argument {position} is {value!r}, not a TensorMap of a "
                                  "kernel compiled with descriptor metadata")
            params += _tensor_map_params(name, value, descriptor_meta[len(maps)], len(maps), maps)
            continue
        params.append(_param(name, position, kind, value))
    params += [(NULL, 0, 0, 0.0), (NULL, 0, 0, 0.0)]  # global and profile scratch: none
    if len(params) > MAX_PARAMS or len(maps) > MAX_TENSOR_MAPS:
        raise Unsupported(f"{name}: {len(params)} parameters and {len(maps)} tensor maps, beyond the native path's "
                          f"{MAX_PARAMS} and {MAX_TENSOR_MAPS}")
    grid = list(launcher.grid)
    return (int(launcher.function), grid, 32 * int(meta.num_warps), int(meta.shared), params, str(name), maps)


MAX_PARAMS, MAX_TENSOR_MAPS = 192, 8  # a launch's limits in native.cpp (kMaxParams, kMaxMaps)
_TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap)


def _tensor_map_words(cu_map: object) -> list[int]:
    """The 128 bytes of the tensor map that Triton's launcher made, as 16 signed 64-bit words: from
    the host address an older Triton's parameter object gives (``tma_desc_cpu_ptr``), or from a
    ``PyCUtensorMap`` (a Python object whose struct ends with the 64-byte-aligned ``CUtensorMap``).
    Unsupported for any other object."""
    import ctypes

    if hasattr(cu_map, "tma_desc_cpu_ptr"):
        address = int(cu_map.tma_desc_cpu_ptr())
    else:
        size = type(cu_map).__basicsize__
        offset = size - _TENSOR_MAP_BYTES
        if type(cu_map).__name__ != "PyCUtensorMap" or offset < 16 or offset % 64:
            raise Unsupported(f"a tensor map of type {type(cu_map).__name__} and size {size}")
        address = id(cu_map) + offset
    raw = ctypes.string_at(address, _TENSOR_MAP_BYTES)
    return [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, _TENSOR_MAP_BYTES, 8)]


def _tensor_map_params(name: str, value: TensorMap, meta: dict, index: int, maps: list) -> list[tuple]:
    """A descriptor argument as Triton's launcher expands it (``make_tensordesc_arg``): the tensor
    map (this launch's map ``index``, pointed at ``value.slot`` at every launch), then the shape as
    32-bit and the strides as 64-bit integers."""
    try:
        from triton.backends.nvidia.driver import make_tensordesc_arg
    except ImportError as exc:
        raise Unsupported(f"{name}: no NVIDIA tensor-map encoder ({exc})") from exc
    import inspect

    extra = (None,) * (len(inspect.signature(make_tensordesc_arg).parameters) - 2)  # (arg, metadata[, _])
    try:
        cu_map, *sizes = make_tensordesc_arg(value.descriptor, meta, *extra)
    except Exception as exc:  # noqa: BLE001 - a map Triton cannot encode: the op keeps its Python path
        raise Unsupported(f"{name}: Triton could not encode the tensor map ({exc!r})") from exc
    rank = len(value.descriptor.shape)
    if len(sizes) != 2 * rank:
        raise Unsupported(f"{name}: a descriptor expanded to {len(sizes)} integers, not {2 * rank}")
    maps.append(_tensor_map_words(cu_map))
    return ([(TENSOR_MAP, value.slot.index, index, 0.0)] + [(CONST_I32, 0, int(v), 0.0) for v in sizes[:rank]]
            + [(CONST_I64, 0, int(v), 0.0) for v in sizes[rank:]])


def _param(name: str, position: int, kind: object, value: object) -> tuple:
    if isinstance(kind, str) and kind.startswith("*"):
        if not isinstance(value, Slot):
            raise Unsupported(f"{name}: pointer argument {position} is {value!r}, not a slot")
        return (TENSOR, value.index, 1, 0.0)
    if isinstance(value, Slot):
        raise Unsupported(f"{name}: argument {position} of type {kind!r} given a tensor")
    if isinstance(value, Arg):
        table = _FLOAT_ARG if value.kind == "float" else _INT_ARG
        if kind not in table:
            raise Unsupported(f"{name}: argument {position} of type {kind!r} given a per-call {value.kind}")
        return (table[kind], value.index, 0, 0.0)
    if kind not in _CONST or not isinstance(value, (bool, int, float)):
        raise Unsupported(f"{name}: argument {position} of type {kind!r} = {value!r}")
    if kind in ("fp32", "fp64"):
        return (_CONST[kind], 0, 0, float(value))
    return (_CONST[kind], 0, int(value), 0.0)


def program(forward: Builder, outputs: Sequence[Slot], *, differentiable: Sequence[bool] | None = None,
            saved: Sequence[Slot] = (), backward: Builder | None = None,
            gradients: Sequence[Slot | tuple[Slot, int] | None] = (),
            grad_layouts: Sequence[tuple[torch.dtype, Sequence[int], Sequence[int]] | None] = ()) -> Any:
    """The C++ program of ``forward`` (returning ``outputs``; ``saved`` what the backward is given
    first), with ``backward`` (given ``saved``, then one gradient per output, laid out as its
    ``grad_layouts`` entry says: dtype, sizes, strides, or None for a gradient no kernel reads)
    returning ``gradients``: per forward input a slot, a ``(slot, row)`` pair (that row of a 2-d
    slot), or None. An unused output's gradient that a kernel reads is zeros.

    Returns NOT_SERVED where a saved tensor's layout repeats memory (a stride of 0 along a
    dimension of more than one element, a broadcast input): a saved-tensor hook such as
    ``save_on_cpu`` hands such a tensor back as a copy, and the node could not lay the copy out
    again in that layout; the op's Python path saves it its own way."""
    if backward is not None and any(_overlapping(forward.layout(slot)) for slot in saved):
        return NOT_SERVED
    native = module()
    back = None
    if backward is not None:
        slots = [-1 if g is None else (g[0] if isinstance(g, tuple) else g).index for g in gradients]
        rows = [g[1] if isinstance(g, tuple) else -1 for g in gradients]
        layouts = [layout or (torch.bool, (), ()) for layout in grad_layouts]
        back = native.Program(
            len(backward.given), backward.allocs, backward.launches, slots, [], [], rows,
            [dtype for dtype, _, _ in layouts], [list(sizes) for _, sizes, _ in layouts],
            [list(strides) for _, _, strides in layouts], [layout is not None for layout in grad_layouts],
            [forward.layout(slot) for slot in saved], None)
    _keep_alive(forward, backward)
    return native.Program(
        len(forward.given), forward.allocs, forward.launches, [s.index for s in outputs],
        list(differentiable) if differentiable is not None else [], [s.index for s in saved], [], [], [], [], [],
        [], back)


def _overlapping(layout: tuple) -> bool:
    """Whether a (dtype, sizes, strides) layout repeats memory: a stride of 0 along a dimension of
    more than one element."""
    _, sizes, strides = layout
    return any(stride == 0 and size > 1 for size, stride in zip(sizes, strides))


# The compiled kernels whose CUfunction handles programs hold. A program can outlive the op's
# plan table and the Kernel's cache (an autograd graph holds it), and a CompiledKernel may unload
# its module when collected (newer Triton): these references keep every recorded one loaded. One
# entry per compiled variant ever recorded.
_RECORDED: dict[int, Any] = {}


def _keep_alive(*builders: Builder | None) -> None:
    for builder in builders:
        for compiled in getattr(builder, "compiled", ()):
            _RECORDED[id(compiled)] = compiled


class Entry:
    """An op's programs by call signature, in C++ (``Entry`` in native.cpp): an entry point's
    first step, before its Python checks.

    ``entry.call(*tensors, *floats, *ints)`` (in the order its programs take them) runs the program
    recorded for the call's signature and returns its outputs (the output itself where ``single``),
    or None: a signature with no program yet, one recorded as not served, an argument that is not
    None or a plain CUDA ``torch.Tensor`` or Parameter (a subclass, a functorch wrapper, a nested
    or a dual tensor), or a scalar that breaks a rule below. On None the op takes its Python path, which validates the call and, through
    :meth:`remember`, records the signature's program (or that it is not served).

    The key holds grad mode and, per tensor, its dtype, device, 16-byte alignment, requires_grad,
    sizes and strides: every field of the ops' Python plan keys. A program found under it is the one
    the Python path would run, and every check that the Python path made on an earlier call of the
    signature holds again, the scalars' aside: those the entry repeats. Each float must be a Python
    float or int, finite, at least its minimum, and 0 where the tensor argument it needs is None
    (``floats``: one ``(minimum, index of that tensor or None)`` per float). Ints are taken as
    given: an op whose program or checks depend on an int's value cannot use an entry.

    Where :func:`enabled` does not hold, ``entry.call`` returns None: the entry point's Python need
    not ask (an entry point asks only ``kernels._ops.route()`` first, which Dynamo must see). The
    entry is built at the first call that finds the native path on; from then on ``entry.call`` is
    a builtin function (no pybind11 dispatch) that asks what :func:`enabled` asks in C++, reading
    the list object ``_STATE`` was when the entry was built (the tests switch the path off by
    changing the list in place; a list put in its place goes unseen by entries built before).

    It is one of the plan tables that ``kernels._launch.forget_plans`` empties, and starts afresh
    at ``_launch.PLAN_LIMIT`` signatures, as they do."""

    def __init__(self, tensors: int, floats: Sequence[tuple[float, int | None]] = (), ints: int = 0,
                 single: bool = True):
        self._shape = (tensors, [float(low) for low, _ in floats], [-1 if need is None else need for _, need in floats],
                       ints, single, _launch.PLAN_LIMIT)
        self._entry: Any = None
        self.call = self._first_call
        _launch.register_table(self)

    def _built(self) -> Any:
        if self._entry is None:
            self._entry = module().Entry(*self._shape)
            # later calls go straight to C++ (a builtin function), which asks what enabled() asks
            self.call = self._entry.function(_STATE)
        return self._entry

    def _first_call(self, *args: object) -> Any:
        return self._built()(*args) if enabled() else None

    def remember(self, tensors: Sequence[torch.Tensor | None], prog: Any) -> None:
        """Record ``prog`` (a program, or :data:`NOT_SERVED`) for the signature of ``tensors``."""
        self._built().remember(tuple(tensors), None if prog is NOT_SERVED else prog)

    def clear(self) -> None:
        if self._entry is not None:
            self._entry.clear()

    def __len__(self) -> int:
        return 0 if self._entry is None else len(self._entry)


def serve(table: dict, key: tuple, build: Any, entry: Entry | None, tensors: Sequence[torch.Tensor | None],
          floats: Sequence[float] = (), ints: Sequence[int] = (), *, graph: bool) -> list[torch.Tensor] | None:
    """An op's call through the native path (its arguments validated): the program in ``table``
    under ``key`` (``build()`` makes it on a miss: a program or :data:`NOT_SERVED`), recorded in
    ``entry`` (where the op has one) for the next call of the signature, run with (``graph``) or
    without its backward node. Returns the outputs, or None where the program is not served (the
    op's Python path then takes the call). ``key`` must hold all that the program depends on:
    whatever the entry's key holds (grad mode and, per tensor, dtype, device, alignment,
    requires_grad, sizes and strides)."""
    prog = table.get(key)
    if prog is None:
        prog = _launch.remember(table, key, build())
    if entry is not None:
        entry.remember(tensors, prog)
    if prog is NOT_SERVED:
        return None
    return (apply if graph else run)(prog, list(tensors), list(floats), list(ints))


def apply(prog: Any, inputs: list, floats: list, ints: list) -> list[torch.Tensor]:
    """Run ``prog``'s forward and record its backward node; returns the outputs."""
    return _STATE[0].apply(prog, inputs, floats, ints)


def run(prog: Any, inputs: list, floats: list, ints: list) -> list[torch.Tensor]:
    """Run ``prog``'s forward with no graph; returns the outputs."""
    return _STATE[0].run(prog, inputs, floats, ints)
