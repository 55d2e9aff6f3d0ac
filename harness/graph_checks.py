"""Checks that a kernel composes with PyTorch's graph machinery, the way users call fused kernels
inside compiled models:

* ``opcheck``: the implementation's call, run with the kernels' entry points routed to their
  custom ops (``harness.validate.custom_ops_routed``), is recorded below autograd; every custom op it makes,
  forward and backward, goes through ``torch.library.opcheck`` with the exact arguments it was
  called with (schema, fake tensor, autograd registration, AOT dispatch with dynamic shapes).
* ``compile``: the implementation compiled with ``fullgraph=True``: a graph break fails. Its
  outputs and gradients must equal the direct call's bitwise. With ``KernelSpec.dynamic_shapes``
  it is compiled with dynamic shapes, and a graph that holds an input size as a constant (other
  than 0 and 1, which Dynamo specialises by design) fails: it would compile again for every new
  size. That is judged on the compilation itself (:func:`specialised_sizes`), so a case's
  verdict does not depend on which cases ran before it. A size equal to the length of a list
  argument is exempt: Dynamo guards on every list's length, so such a size is static whatever
  the kernel does.
* ``cudagraph``: the call is captured in a CUDA graph and replayed on new values copied into its
  static inputs (the same recipes with other seeds); the replay must equal a direct call on those
  values bitwise, and capture must raise nothing (a host synchronisation, an allocation of a
  data-dependent size).

The compiler: Inductor on a GPU, what users get. On the CPU, ``aot_eager`` (Dynamo, fake tensors
and AOTAutograd, everything that decides whether a kernel composes): Inductor would compile C++
for the CPU, a backend no GPU kernel's user runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.case import Case
from harness.checks import CheckResult, Fn, _grad_outputs, _output_names, _same_bits, as_outputs, grad_names, prepare
from harness.spec import KernelSpec
from harness.validate import custom_ops_routed

GRAPH_CHECKS = ("opcheck", "compile", "cudagraph")
# At most this many cases per property: each compiles or traces the call several times over.
GRAPH_EXAMPLES = 3
GRAPH_EXAMPLES_INTERPRETED = 2  # under the interpreter (CPU CI's time)
BUILTIN_NAMESPACES = ("aten", "prim", "prims", "_c10d_functional", "c10d")


# ---- running the implementation ------------------------------------------------------------------


def _call(spec: KernelSpec, fn: Fn, kwargs: dict[str, Any], case: Case, device):
    """Outputs (detached), which of them require grad, and the gradients of the spec's grad inputs
    (None where unused), from the case's grad_outputs (built from its seed: the same values on
    every call)."""
    outs = as_outputs(fn(**kwargs))
    diff = [o for o in outs if o.requires_grad]
    grads: tuple = ()
    if diff:
        grad_outs = [g.tensor for g in _grad_outputs(case, tuple(diff), device, case.grad_layout)]
        grads = torch.autograd.grad(diff, [kwargs[n] for n in grad_names(spec, case)], grad_outs, allow_unused=True)
    return [o.detach() for o in outs], [o.requires_grad for o in outs], grads


def _compare(spec: KernelSpec, what: str, direct, other, names: tuple[str, ...]) -> list[str]:
    """Bitwise differences between two (outputs, gradients) pairs, named."""
    problems = []
    (outs_a, diff_a, grads_a), (outs_b, diff_b, grads_b) = direct, other
    if len(outs_a) != len(outs_b):
        return [f"{what} returned {len(outs_b)} outputs, the direct call {len(outs_a)}"]
    for name, a, b, da, db in zip(_output_names(spec, len(outs_a)), outs_a, outs_b, diff_a, diff_b):
        if not _same_bits(a, b):
            problems.append(f"{name}: {what} differs from the direct call ({_difference(a, b)})")
        if da != db:
            problems.append(f"{name}: {what} {'requires' if db else 'does not require'} grad, the direct call's "
                            f"{'does' if da else 'does not'}")
    if len(grads_a) != len(grads_b):
        problems.append(f"{what} gave {len(grads_b)} gradients, the direct call {len(grads_a)}")
    for name, a, b in zip(names, grads_a, grads_b):
        if (a is None) != (b is None):
            problems.append(f"grad {name}: {what} gave {'none' if b is None else 'one'}, the direct call "
                            f"{'none' if a is None else 'one'}")
        elif a is not None and not _same_bits(a, b):
            problems.append(f"grad {name}: {what} differs from the direct call ({_difference(a, b)})")
    return problems


def _difference(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{tuple(b.shape)} {b.dtype} against {tuple(a.shape)} {a.dtype}"
    differ = ~((a == b) | (a.isnan() & b.isnan())) if a.is_floating_point() else a != b
    return f"{int(differ.sum())} of {a.numel()} elements"


def _first_line(exc: BaseException, limit: int = 600) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= limit else text[:limit] + " ..."


# ---- opcheck -------------------------------------------------------------------------------------


class _RecordCustomOps(TorchDispatchMode):
    """Records each call of a custom op (any namespace but PyTorch's own) with its arguments, and
    whether its outputs held a NaN (see :func:`_opcheck_tests`)."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[torch._ops.OpOverload, tuple, dict, bool, bool]] = []
        self.backward = False  # calls made by autograd's backward pass run without a graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        outs = func(*args, **kwargs)
        if func.namespace not in BUILTIN_NAMESPACES:
            flat = outs if isinstance(outs, (list, tuple)) else [outs]
            nan = any(isinstance(o, torch.Tensor) and o.is_floating_point() and bool(o.isnan().any()) for o in flat)
            self.calls.append((func, args, kwargs, self.backward, nan))
        return outs


def _recorded_calls(spec: KernelSpec, fn: Fn, case: Case, device) -> list[tuple]:
    """The custom-op calls of a forward without gradients, then of one forward and backward, each
    with arguments of its own (clones, the forward's with requires_grad as they were), in order,
    one per op and branch (its bool and string arguments: a no-gradient forward saves nothing):
    ``(op, args, kwargs, whether its outputs held a NaN)``."""
    prepared = prepare(case, device)
    names = grad_names(spec, case)
    kwargs = prepared.kwargs(names)
    recorder = _RecordCustomOps()
    with custom_ops_routed():
        with torch.no_grad(), recorder:  # an op's no-gradient branch (nothing saved for a backward)
            fn(**prepare(case, device).kwargs())
        with recorder:
            outs = as_outputs(fn(**kwargs))
        diff = [o for o in outs if o.requires_grad]
        if diff:
            grad_outs = [g.tensor for g in _grad_outputs(case, tuple(diff), device, case.grad_layout)]
            recorder.backward = True
            with recorder:
                torch.autograd.grad(diff, [kwargs[n] for n in names], grad_outs, allow_unused=True)
    seen, calls = set(), []
    for func, args, kw, in_backward, nan in recorder.calls:
        grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in (*args, *kw.values()))
        variant = (func, in_backward, grad, _options(args), _options(tuple(kw.items())))
        if variant in seen:
            continue
        seen.add(variant)
        calls.append((func, *_fresh((args, kw), grad=not in_backward), nan))
    return calls


def _options(values) -> tuple:
    """A call's bools and strings (what picks an op's branch), in order: calls that differ in them
    are opchecked apart."""
    flat = []
    for v in values:
        if isinstance(v, (list, tuple)):
            flat.extend(_options(v))
        elif isinstance(v, (bool, str)):
            flat.append(v)
    return tuple(flat)


def _fresh(value, grad: bool):
    """Clones of the tensors in a recorded call: leaves that require grad where the original did
    (``grad``), none in a call from the backward pass, which autograd runs without a graph."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(grad and value.requires_grad and value.is_floating_point())
    if isinstance(value, (list, tuple)):
        return type(value)(_fresh(v, grad) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v, grad) for k, v in value.items()}
    return value


def check_opcheck(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """``torch.library.opcheck`` on every custom op the call makes, with its recorded arguments."""
    calls = _recorded_calls(spec, fn, case, device)
    if not calls:
        return CheckResult("opcheck", False, problems=[
            "the call made no custom op: torch.compile cannot trace it as one op and opcheck has "
            "nothing to check; register the kernel with torch.library.custom_op (or triton_op), "
            "or declare a KnownFailure for this check with the reason"])
    problems = []
    for func, args, kwargs, nan in calls:
        try:
            torch.library.opcheck(func, args, kwargs, test_utils=_opcheck_tests(nan))
        except Exception as exc:  # noqa: BLE001 - opcheck raises OpCheckError; report whatever it raised
            problems.append(f"{func.name()}: {_opcheck_reason(exc)}")
    return CheckResult("opcheck", not problems, problems=problems)


def _opcheck_tests(nan: bool) -> tuple[str, ...]:
    """opcheck's tests for one call, ``nan`` whether its recorded outputs held a NaN. Its
    AOT-dispatch test compares the traced op's outputs with the op's own without ``equal_nan``, so
    a call whose outputs hold a NaN (softmax of a row of -inf, as eager's) fails it whatever the
    kernel does: such a call skips that one test. The ``compile`` check runs the same AOT dispatch
    on every case, comparing bits, NaNs included."""
    tests = tuple(torch.library._OPCHECK_DEFAULT_UTILS)
    return tuple(t for t in tests if t != "test_aot_dispatch_dynamic") if nan else tests


def _opcheck_reason(exc: BaseException) -> str:
    """opcheck's verdict in one line, with the underlying cause: which test failed and why."""
    text = str(exc).split(" (scroll up for stack trace)")[0]
    cause = exc.__cause__
    if cause is not None:
        detail = _first_line(cause)
        if detail not in text:
            text += f" | cause: {detail}"
    return text[:900]


# ---- compile -------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Compiled:
    """One implementation's compiled wrapper, the graphs it has compiled, and the sizes any of
    them holds as constants (``source == value``): a call whose own sizes match one of those is
    judged pinned whether it compiled or was served a pinned graph compiled for an earlier case,
    so that its verdict does not depend on which cases ran before it."""

    function: Callable
    graphs: int = 0
    pins: set = dataclasses.field(default_factory=set)


_COMPILED: dict[tuple, _Compiled] = {}


def compile_backend(device: torch.device) -> str:
    return "inductor" if torch.device(device).type == "cuda" else "aot_eager"


def specialised_sizes() -> list[str]:
    """In a compiler backend, after AOTAutograd has traced the backward too: the input sizes the
    traced graphs hold as constants other than 0 and 1, as ``source == value`` (Dynamo replaces a
    size's symbol by its value when the traced code needs the number itself: a dict lookup, a
    range, bit arithmetic). Such a graph serves that size only, and every new size compiles again."""
    context = torch._guards.TracingContext.try_get()
    shape_env = getattr(getattr(context, "fake_mode", None), "shape_env", None)
    if shape_env is None:
        return []
    out = []
    for symbol, value in shape_env.replacements.items():
        # integer symbols only: a float argument of a custom op is traced as a constant by design
        if symbol.is_integer and getattr(value, "is_number", False) and int(value) not in (0, 1):
            sources = shape_env.var_to_sources.get(symbol, [])
            name = sources[0].name if sources else str(symbol)
            out.append(f"{name() if callable(name) else name} == {int(value)}")
    return sorted(out)


def _own_code(fn: Callable, label: str) -> Callable:
    """``fn`` with a code object of its own: Dynamo keeps one cache, and one recompilation limit,
    per code object, so each compiled implementation gets its own rather than sharing one."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{label}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def _compiled(spec: KernelSpec, fn: Fn, device) -> _Compiled:
    key = (spec.name, fn, torch.device(device).type, spec.dynamic_shapes)
    entry = _COMPILED.get(key)
    if entry is None:
        inner = compile_backend(device)

        def counting_backend(gm, example_inputs):
            compiled = torch._dynamo.lookup_backend(inner)(gm, example_inputs)
            entry.graphs += 1
            entry.pins.update(specialised_sizes())
            return compiled

        def call(**kwargs):
            return fn(**kwargs)

        entry = _COMPILED[key] = _Compiled(torch.compile(
            _own_code(call, f"{len(_COMPILED)}"), backend=counting_backend, fullgraph=True,
            dynamic=spec.dynamic_shapes or None))
    return entry


_SIZE_SOURCE = re.compile(r"\['(\w+)'\]\.size\(\)\[(\d+)\]")


def _pinned(pins: set, kwargs: dict[str, Any]) -> list[str]:
    """The pins (``source == value``) that this call's sizes satisfy: the graphs serving it hold
    its sizes as constants. A pin whose source names no tensor of the call is kept (unknown)."""
    out = []
    for pin in sorted(pins):
        source, value = pin.rsplit(" == ", 1)
        match = _SIZE_SOURCE.search(source)
        tensor = kwargs.get(match.group(1)) if match else None
        if not isinstance(tensor, torch.Tensor) or (
                int(match.group(2)) < tensor.ndim and tensor.shape[int(match.group(2))] == int(value)):
            out.append(pin)
    return out


def _compiled_call(entry: _Compiled, spec: KernelSpec, kwargs: dict[str, Any], case: Case, device, grad: bool):
    # No duck shaping: two sizes that happen to be equal in this case must not share a symbol, or
    # pinning one (legitimately, below) would pin the other. No compiled-graph caches (Inductor's
    # FX graph cache, AOTAutograd's): a hit evaluates the cached graph's guards in this call's
    # ShapeEnv, which can replace a size's symbol by its value, a pin that the traced code never
    # asked for. The H100 nightly failed flash_attention's compile check so, on a case that passed
    # with the caches empty (head_dim pinned to 16); Inductor on the CPU pins the same case on a
    # warm cache, not on an empty one, and with the caches off on neither. (On the CPU one
    # warm-cache case also gave values other than the direct call's: a cache's own fault, which
    # users with the caches on may meet, and which this check, compiling afresh, does not judge.)
    with torch._dynamo.config.patch(cache_size_limit=256, accumulated_cache_size_limit=4096), \
            torch.fx.experimental._config.patch(use_duck_shape=False), _no_graph_caches(), \
            torch.set_grad_enabled(grad):
        return _call(spec, entry.function, kwargs, case, device)


@contextlib.contextmanager
def _no_graph_caches() -> Iterator[None]:
    """Inductor's FX graph cache and AOTAutograd's cache off for the block (``_compiled_call``)."""
    import torch._functorch.config
    import torch._inductor.config

    with contextlib.ExitStack() as stack:
        stack.enter_context(torch._inductor.config.patch(fx_graph_cache=False))
        if hasattr(torch._functorch.config, "enable_autograd_cache"):
            stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
        yield


# What a compile error's text says about its cause, in the words a kernel author acts on.
_CAUSES = (
    (r"data-dependent|DataDependent|Tensor\.item|\.item\(\)|dynamic shape operator|nonzero",
     "the call reads tensor values on the host (.item(), a branch on values, or a size that depends "
     "on them), which a compiled graph cannot hold"),
    (r"no fake impl|fake impl|Meta kernel", "a custom op has no fake implementation (register_fake), so "
     "the compiler cannot know its outputs' shapes"),
)


def _compile_failure(exc: BaseException) -> str:
    """One readable line: graph break or compile error, the cause where recognised, Dynamo's text."""
    text = _first_line(exc)
    kind = "graph break under fullgraph=True" if isinstance(exc, torch._dynamo.exc.Unsupported) else "torch.compile failed"
    for pattern, cause in _CAUSES:
        if re.search(pattern, text):
            return f"{kind}: {cause}. {text}"
    return f"{kind}: {text}"


def check_compile(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """``torch.compile(fullgraph=True)`` of the call, with gradients and without: no graph break,
    bitwise the direct call's outputs and gradients, no graph pinned to the case's sizes (module
    docstring)."""
    entry = _compiled(spec, fn, device)
    problems = []
    differentiable = grad_names(spec, case)
    for grad in (True, False):
        names = differentiable if grad else ()
        with torch.set_grad_enabled(grad):
            direct = _call(spec, fn, prepare(case, device).kwargs(names), case, device)
        kwargs = prepare(case, device).kwargs(names)
        try:
            got = _compiled_call(entry, spec, kwargs, case, device, grad)
        except Exception as exc:  # noqa: BLE001 - any error of tracing or compiling is the finding
            return CheckResult("compile", False, problems=[_compile_failure(exc)])
        what = "the compiled call" if grad else "the compiled call without gradients"
        problems += _compare(spec, what, direct, got, differentiable)
    # A size equal to a list argument's length is static by construction: Dynamo guards on the
    # length of every list it traces (dlrm_embedding's features, one per cardinality).
    lengths = {len(v) for v in kwargs.values() if isinstance(v, (list, tuple))}
    pinned = [p for p in _pinned(entry.pins, kwargs) if int(p.rsplit(" == ", 1)[1]) not in lengths]
    if spec.dynamic_shapes and pinned:
        problems.append(
            f"compiled for these sizes only ({', '.join(pinned)}): every new size compiles again, where the "
            f"spec declares dynamic shapes (KernelSpec.dynamic_shapes). The traced code needs a size as a "
            f"number (a dict lookup, a range or bit arithmetic on it) outside the custom op")
    return CheckResult("compile", not problems, problems=problems)


# ---- cudagraph -----------------------------------------------------------------------------------


def _new_values(case: Case) -> Case:
    """The case with other values: every tensor's recipe with another seed (same shape, layout
    and value kind, so the same domain)."""
    tensors = {n: dataclasses.replace(r, seed=r.seed + 7919) if r is not None else None for n, r in case.tensors.items()}
    return dataclasses.replace(case, tensors=tensors)


def check_cudagraph(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Capture the forward call in a CUDA graph, copy new values into its static inputs, replay,
    and compare with a direct call on those values, bitwise."""
    prepared = prepare(case, device)
    static = prepared.kwargs()
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):  # warm up outside the capture: compile, tune, allocate plans
        for _ in range(2):
            fn(**static)
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            captured = as_outputs(fn(**static))
    except Exception as exc:  # noqa: BLE001 - what capture refused is the finding
        torch.cuda.synchronize(device)
        return CheckResult("cudagraph", False, problems=[f"capture failed: {_capture_reason(exc)}"])
    fresh_prepared = prepare(_new_values(case), device)
    fresh = fresh_prepared.kwargs()
    for name, placed in prepared.placed.items():  # whole buffers: an expanded view cannot be copied into
        placed.base.copy_(fresh_prepared.placed[name].base)
    graph.replay()
    torch.cuda.synchronize(device)
    replayed = [o.clone() for o in captured]
    direct = [o.detach() for o in as_outputs(fn(**fresh))]
    flags = [False] * len(direct)
    problems = _compare(spec, "the graph's replay on new values", (direct, flags, ()), (replayed, flags[:len(replayed)], ()), ())
    return CheckResult("cudagraph", not problems, problems=problems)


def _capture_reason(exc: BaseException) -> str:
    text = _first_line(exc)
    if re.search(r"not permitted when stream is capturing|capturing", text):
        text += (" (a host synchronisation, such as .item(), .cpu() or a data-dependent size, or an "
                 "allocation the capture cannot take)")
    return text


GRAPH_CHECK_FUNCTIONS = {"opcheck": check_opcheck, "compile": check_compile, "cudagraph": check_cudagraph}
