"""Benchmark one spec at its fixed shapes: kernel, eager, torch.compile and the spec's peers side by side.

For every benchmark shape of a spec's performance model, and for the forward pass and the
forward+backward pass, each implementation of the spec, the eager reference, ``torch.compile``
of the reference and the spec's peers (other libraries' kernels for the same function, where
they are installed) are timed interleaved (``harness.bench.timing``) on fresh inputs, in two
figures: device time and per-call wall time with the host included. Each figure is a record of
its own (``figure``: "device" or "wall"; a wall record's key has ``/wall`` before the
implementation), so that reports and the regression gate show and judge both. A last shape,
tiny (:func:`launch_shape`), measures launch overhead: its wall figure is the host's cost of a
call. Afterwards each kernel's result on the timed inputs is checked again against the reference
under the error budget: a kernel that skips work cannot win. Results are plain dicts in the
results-file schema.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from harness.bench.record import BenchmarkRecord
from harness.bench.roofline import Roofline
from harness.bench.timing import (
    TIMING_METHOD, WALL_TIMING_METHOD, TimingPlan, iqr, median, time_interleaved, time_wall, wall_batch,
)
from harness.call import Call
from harness.case import Case, TensorRecipe, torch_dtype
from harness.checks import as_outputs, grad_names, prepare
from harness.dispatch import run_check
from harness.errors import describe_exception
from harness.layouts import Layout
from harness.regression import speedup
from harness.runner import skip_reason
from harness.strategies import tensor_shape
from harness.spec import BATCH, PASSES, REFERENCE_IMPLEMENTATIONS, BenchShape, Dim, KernelSpec, OptionalPeer
from harness.values import drawn_on


def bench_key(spec: str, pass_: str, shape: BenchShape, implementation: str, figure: str = "device") -> str:
    """A benchmark's name in results and baselines. The wall figure's has ``/wall`` before the
    implementation, so that everything but the implementation names one comparison (the gate
    takes the machine's drift from the references that share it)."""
    dims = ",".join(f"{k}={v}" for k, v in sorted(shape.dims.items()))
    scalars = ",".join([f"{k}={v}" for k, v in sorted(shape.scalars.items())]
                       + [f"{name}=None" for name in sorted(shape.absent)])
    where = "" if figure == "device" else f"{figure}/"
    return f"{spec}/{pass_}/{dims}{'/' + scalars if scalars else ''}/{shape.dtype}/{where}{implementation}"


def launch_shape(spec: KernelSpec) -> BenchShape | None:
    """The spec's launch-overhead shape: ``perf.launch_shape`` if it names one, else its first
    benchmark shape with every size at its smallest legal value (a dim's first choice, else its
    minimum). At that size the device's work is negligible and per-call wall time is the host's."""
    if spec.perf is None or not spec.perf.shapes:
        return None
    if spec.perf.launch_shape is not None:
        return spec.perf.launch_shape
    first = spec.perf.shapes[0]
    dims = {}
    for name, value in first.dims.items():
        dim = spec.dims.get(name)
        dims[name] = (dim.choices[0] if dim.choices else max(dim.min, 1)) if isinstance(dim, Dim) else value
    return BenchShape(dims, first.dtype, dict(first.scalars), absent=first.absent)


def bench_case(spec: KernelSpec, shape: BenchShape, seed: int) -> Case:
    """A contiguous case at a benchmark shape (no batch dims), with the spec's first value kind;
    the optional tensors that ``shape.absent`` names are left out."""
    dims: dict[str, Any] = {BATCH: []} if BATCH in spec.dims else {}
    dims.update(shape.dims)
    tensors: dict[str, TensorRecipe | None] = {}
    for i, arg in enumerate(spec.tensors):
        shape_ = tensor_shape(tuple(d for d in arg.dims if d != BATCH), shape.dims)
        tensors[arg.name] = (None if arg.name in shape.absent else
                             TensorRecipe(shape_, arg.dtype or shape.dtype, Layout(), arg.values[0], seed * 131 + i))
    return Case(spec=spec.name, dtype=shape.dtype, dims=dims, tensors=tensors, scalars=dict(shape.scalars),
                grad_layout="contiguous", grad_seed=seed)


def perf_call(spec: KernelSpec, shape: BenchShape) -> Call:
    """The call at a benchmark shape as the performance model sees it: its tensors on the meta
    device (shapes and dtypes, no data), None where left out, and its scalars."""
    case = bench_case(spec, shape, seed=0)
    kwargs: dict[str, Any] = {name: torch.empty(r.shape, dtype=torch_dtype(r.dtype), device="meta") if r is not None else None
                              for name, r in case.tensors.items()}
    kwargs.update(case.scalars)
    return Call(kwargs, case.dims, torch_dtype(case.dtype))


def bench_callables(spec: KernelSpec, device: torch.device,
                    shape: BenchShape | None = None) -> tuple[dict[str, Callable], dict[str, str]]:
    """Implementations that can run here, the spec's peers (those that implement ``shape``'s
    variant), and eager and torch.compile of the reference; and why any other could not run."""
    fns: dict[str, Callable] = {}
    skipped: dict[str, str] = {}
    for name, impl in spec.implementations.items():
        reason = skip_reason(spec, name, device)
        if reason:
            skipped[name] = reason
        else:
            fns[name] = impl.load()
    for name, peer in (spec.perf.peers if spec.perf is not None else {}).items():
        if isinstance(peer, OptionalPeer) and shape is not None and peer.applies and not peer.applies(shape.scalars):
            continue
        try:
            fns[name] = peer_callable(peer)
        except PeerUnavailable as exc:
            skipped[name] = str(exc)
    fns["eager"] = spec.reference
    # dynamic=False compiles for each shape, and dynamo keeps its compiled entries on the
    # reference's code object, however many torch.compile wrappers there are: past its recompile
    # limit (8 entries: 4 shapes of forward and forward+backward) it would silently run eager in
    # the "compile" column. A reset per shape starts it afresh; Inductor's on-disk caches keep
    # the recompilation cheap.
    torch._dynamo.reset()
    fns["compile"] = torch.compile(spec.reference, dynamic=False)
    return fns, skipped


class PeerUnavailable(Exception):
    """A spec's optional peer cannot run here (its library is not installed); the message says how
    to install it."""


def peer_callable(peer: Callable | OptionalPeer) -> Callable:
    """A spec's peer as a callable: a plain function, or an ``OptionalPeer`` loaded now (raises
    ``PeerUnavailable`` when its library is missing)."""
    if not isinstance(peer, OptionalPeer):
        return peer
    try:
        return peer.load()
    except ImportError as exc:
        raise PeerUnavailable(f"{peer.name}: {exc}; install it with: {peer.install}") from exc


def timed_calls(spec: KernelSpec, fns: dict[str, Callable], cases: list[Case], device, pass_: str):
    """One call per implementation taking an input-set index, for the chosen pass.

    The implementations under test, the references and the spec's plain peers (torch's own ops,
    such as SDPA) share the input sets: the checks prove that ours never write into their inputs,
    and torch's ops do not. Each third-party peer (an ``OptionalPeer``) gets input sets of its
    own, built from the same cases: its writes are nobody's to check, and one that writes into
    its inputs would change what every other implementation reads after it (Liger-Kernel's SwiGLU
    backward stores its gradients into its inputs a and b)."""
    names = grad_names(spec, cases[0]) if cases else ()
    grad_shapes: list = []  # per case, each differentiable output's (shape, dtype name)

    def input_sets() -> list:
        """Per case: the call's kwargs and grad_output tensors, then what they were placed from
        (the ``Prepared`` and the grad_outputs' ``Placed``, for ``_watching_writes``)."""
        sets = []
        for k, case in enumerate(cases):
            prepared = prepare(case, device)
            kwargs = prepared.kwargs(names if pass_ == "forward_backward" else ())
            placed = []
            if pass_ == "forward_backward":
                if len(grad_shapes) <= k:  # the reference's outputs, once per case
                    outs = [o for o in as_outputs(spec.reference(**prepared.copies(grad_names=names))) if o.requires_grad]
                    grad_shapes.append([(tuple(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs])
                placed = [case.grad_output_recipe(shape, dtype).build(device) for shape, dtype in grad_shapes[k]]
            sets.append((kwargs, [g.tensor for g in placed], prepared, placed))
        return sets

    shared = input_sets()
    own_sets = {name for name, peer in (spec.perf.peers if spec.perf is not None else {}).items()
                if isinstance(peer, OptionalPeer)}

    def make(fn, sets):
        if pass_ == "forward":
            def call(i):
                with torch.no_grad():
                    return fn(**sets[i][0])
        else:
            def call(i):
                kwargs, grads, _, _ = sets[i]
                outs = [o for o in as_outputs(fn(**kwargs)) if o.requires_grad]
                return torch.autograd.grad(outs, [kwargs[n] for n in names], grads[: len(outs)], allow_unused=True)
        return call

    calls = {}
    for name, fn in fns.items():
        if name in own_sets:
            sets = input_sets()
            calls[name] = _watching_writes(name, make(fn, sets), sets)
        else:
            calls[name] = make(fn, shared)
    return calls


class PeerWroteInputs(UserWarning):
    """A third-party peer wrote into the tensors it was handed (it is timed on its own copies)."""


def _watching_writes(name: str, call: Callable[[int], object], sets: list) -> Callable[[int], object]:
    """``call``, whose first call also says which of its input set's tensors it changed, as a
    ``PeerWroteInputs`` warning (kept in the records like any first call's warning): its later
    calls read what it wrote, not the case's values."""
    watched = False

    def first(i: int):
        nonlocal watched
        if watched:
            return call(i)
        _, _, prepared, grads = sets[i]
        snapshots, grad_snapshots = prepared.snapshots(), [g.snapshot() for g in grads]
        out = call(i)
        watched = True
        # the checks' own account of an input's changed regions (``Placed.changes``)
        written = prepared.changes(snapshots)
        written += [f"grad_output[{j}]: {c}" for j, (g, snap) in enumerate(zip(grads, grad_snapshots))
                    for c in g.changes(snap)]
        if written:
            warnings.warn(f"{name} wrote into its inputs ({'; '.join(written)}): its later calls read what it "
                          f"wrote; it is timed on input sets of its own, so the other implementations read the "
                          f"cases' values", PeerWroteInputs, stacklevel=2)
        return out

    return first


SAME_SIZE_COPY = "same-size copy"


def same_size_copy(nbytes: float, device: torch.device) -> Callable[[int], object]:
    """A device-to-device copy moving ``nbytes`` in all (half read, half written), to time beside a
    case: what the memory system gives at this size. Small tensors cannot reach the bandwidth the
    roofline is measured at (a 1 GiB copy): launch, ramp-up and the last wave's tail weigh more,
    so "% of same-size copy" says how far a kernel is from what its size allows."""
    half = max(int(nbytes) // 2, 1)
    src = torch.empty(half, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    return lambda i: dst.copy_(src)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


# A benchmark shape (both passes, compiles included) that takes longer than this is stuck, not slow.
DEFAULT_SHAPE_TIMEOUT_S = 180.0


class ShapeTimeout(Exception):
    """A benchmark shape ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float | None, label: str) -> Iterator[None]:
    """Raise ``ShapeTimeout`` in the block after ``seconds``, naming where it was stopped. A
    process timer's signal: only in the main thread, and a call inside C (a device sync) is
    stopped when it returns. Without a limit, or off the main thread, the block runs unbounded."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name}" if frame else "?"
        raise ShapeTimeout(f"{label} took longer than {seconds:g} s (stopped at {where})")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def bench_spec(spec: KernelSpec, device: torch.device, roofline: Roofline | None, quick: bool = False,
               plan: TimingPlan = TimingPlan(), on_case: Callable[[str], None] | None = None,
               until: float | None = None, not_run: list[str] | None = None,
               peers_not_timed: list[str] | None = None,
               errors: list[str] | None = None, shape_timeout_s: float | None = None) -> list[dict]:
    """Benchmark every shape (only the ``quick`` ones if asked) and pass of ``spec``.

    With ``until`` (a ``time.monotonic()`` value) no new shape starts after it; the shapes left
    out are appended to ``not_run`` as readable labels, so a budgeted run says what it skipped;
    peers that cannot run here (their library is not installed) go to ``peers_not_timed``, with
    how to install them.
    With ``errors``, a shape that raises (out of device memory, a kernel that fails to compile,
    ``ShapeTimeout`` past ``shape_timeout_s``) is appended there as "label: error" and the sweep
    goes on; without it the error propagates. An interrupt (Ctrl-C, or SIGTERM where the CLI turns
    it into one) ends the sweep: the shape it stopped is an error, the rest are not run, and the
    records so far are returned, so a killed job still reports what it measured.
    """
    if spec.perf is None:
        return []
    records: list[dict] = []
    shapes = [s for s in spec.perf.shapes if s.quick or not quick]
    tiny = launch_shape(spec)
    shapes += [tiny] if tiny is not None and tiny not in shapes else []
    unavailable: dict[str, str] = {}
    # Inputs (and the re-check's) are drawn on the device: see harness.values.drawn_on.
    with drawn_on(device):
        interrupted = False
        for shape in shapes:
            scalars = f" {dict(shape.scalars)}" if shape.scalars else ""
            label = f"{spec.name} {dict(shape.dims)} {shape.dtype}{scalars}"
            if interrupted or (until is not None and time.monotonic() >= until):
                if not_run is not None:
                    not_run.append(label)
                continue
            try:
                with time_limit(shape_timeout_s, label):
                    records += _bench_shape(spec, shape, device, roofline, plan, on_case, unavailable,
                                            launch_overhead=shape is tiny)
            except KeyboardInterrupt:
                if errors is None:
                    raise
                errors.append(f"{label}: interrupted")
                interrupted = True
            except Exception as exc:
                if errors is None:
                    raise
                errors.append(f"{label}: {describe_exception(exc, brief=True)}")
                if on_case:
                    on_case(f"{label}: raised {type(exc).__name__}; going on with the next shape")
                if device.type == "cuda":
                    torch.cuda.empty_cache()  # an out-of-memory error must not take the next shapes with it
    if peers_not_timed is not None:
        peers_not_timed += [f"{spec.name} peer {name}: {why}" for name, why in unavailable.items()]
    if interrupted:
        raise BenchInterrupted(records)
    return records


class BenchInterrupted(KeyboardInterrupt):
    """An interrupted sweep, carrying the records measured before it (``records``)."""

    def __init__(self, records: list[dict]):
        super().__init__("benchmark sweep interrupted")
        self.records = records


def _bench_shape(spec: KernelSpec, shape: BenchShape, device: torch.device, roofline: Roofline | None,
                 plan: TimingPlan, on_case: Callable[[str], None] | None, unavailable: dict[str, str] | None = None,
                 launch_overhead: bool = False) -> list[dict]:
    """Both passes of one benchmark shape, both figures; progress lines say where the time went.
    Peers that cannot run here are added to ``unavailable`` with the reason."""
    records: list[dict] = []
    fns, skipped = bench_callables(spec, device, shape)
    if unavailable is not None:
        unavailable.update((name, why) for name, why in skipped.items() if name in spec.perf.peers)
    call = perf_call(spec, shape)  # the performance model's view of the shape, for both passes
    for pass_ in PASSES:
        if pass_ == "forward_backward" and not spec.grad_inputs:
            continue
        label = f"{spec.name} {pass_} {dict(shape.dims)} {shape.dtype}"
        if on_case:
            on_case(label)
        started = time.perf_counter()
        cases = [bench_case(spec, shape, seed) for seed in range(plan.input_sets)]
        nbytes = spec.perf.bytes_moved(call)
        flops = spec.perf.flops(call)
        if pass_ == "forward_backward":
            nbytes += (spec.perf.backward_bytes or spec.perf.bytes_moved)(call)
            flops += (spec.perf.backward_flops or spec.perf.flops)(call)
        calls = timed_calls(spec, fns, cases, device, pass_)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the inputs' time, not the first timed call's
        inputs_done = time.perf_counter()
        warned = _first_call_warnings(calls)  # the first calls: part of the warm-up
        samples = time_interleaved({**calls, SAME_SIZE_COPY: same_size_copy(nbytes, device)}, device, plan)
        copy_ms = median(samples.pop(SAME_SIZE_COPY))
        slowest = max(median(t) for t in samples.values())
        wall = time_wall(calls, device, wall_batch(slowest, plan), plan)
        timed = time.perf_counter()
        del calls  # the timing's input sets: the re-checks below need the memory at large shapes
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rechecks = {name: _recheck(spec, fns[name], pass_, cases[0], device) for name in samples if not _context(spec, name)}
        common = dict(pass_=pass_, nbytes=nbytes, flops=flops, roofline=roofline, launch_overhead=launch_overhead,
                      warned=warned)
        records += _figure_records(spec, shape, "device", samples, rechecks, copy_ms=copy_ms, **common)
        records += _figure_records(spec, shape, "wall", wall, rechecks, copy_ms=None, **common)
        if on_case:
            on_case(f"{label}: inputs {inputs_done - started:.1f} s, warm-up (compiles included) and timing "
                    f"{timed - inputs_done:.1f} s, re-checks {time.perf_counter() - timed:.1f} s")
    return records


def _first_call_warnings(calls: dict[str, Callable[[int], object]]) -> dict[str, list[str]]:
    """Each implementation's first call at this shape, outside the timing, with every warning it
    raises kept ("Category: message"): a kernel that falls back to a slower path or a native build
    that failed says so in the results, not only in a log."""
    out = {}
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(0)
        out[name] = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))
    return out


def _context(spec: KernelSpec, name: str) -> bool:
    return name in REFERENCE_IMPLEMENTATIONS or name in spec.perf.peers


def _recheck(spec: KernelSpec, fn: Callable, pass_: str, case: Case, device) -> tuple[str, str | None]:
    """("passed" | "failed", the failure's first line) for an implementation under test, re-run on
    the first timed input set."""
    result = run_check(spec, fn, "forward" if pass_ == "forward" else "backward", case, device)
    return ("passed", None) if result.passed else ("failed", result.details().splitlines()[0])


def _figure_records(spec: KernelSpec, shape: BenchShape, figure: str, samples: dict[str, list[float]],
                    rechecks: dict[str, tuple[str, str | None]], *, pass_: str, nbytes: float, flops: float,
                    roofline: Roofline | None, copy_ms: float | None, launch_overhead: bool,
                    warned: dict[str, list[str]]) -> list[dict]:
    """One record per implementation for one figure of one pass of one shape. ``best_peer`` names
    the fastest context implementation (eager, compile or a peer) in this figure by median;
    ``speedup_vs_best_peer`` is the median over the repetitions of its time over this one's in the
    same repetition (both timers time every implementation once a repetition), with the sign
    test's interval of that median and its reading (``vs_best_peer``: "faster" only where the
    whole interval lies above 1, "tie" where it straddles 1: ``harness.regression.speedup``,
    paired); ``speedup_vs_eager`` and ``speedup_vs_compile`` are the same median against those."""
    medians = {n: median(t) for n, t in samples.items()}
    context = {n: m for n, m in medians.items() if _context(spec, n)}
    best = min(context, key=context.get) if context else None

    def vs(other: str | None, times: list[float]) -> tuple[float | None, float, float, str | None]:
        if other is None or other not in samples:
            return None, math.nan, math.nan, None
        return speedup(times, samples[other], paired=True) if samples[other] is not times else (1.0, 1.0, 1.0, "tie")

    records = []
    for name, times in samples.items():
        against = {other: vs(other, times) for other in {best, "eager", "compile"}}  # each read once
        vs_best, low, high, reading = against[best]
        recheck, detail = rechecks.get(name, ("n/a", None))
        ms = medians[name]
        gbps = nbytes / (ms / 1e3) / 1e9 if ms > 0 else None
        tflops = flops / (ms / 1e3) / 1e12 if flops and ms > 0 else None
        records.append(BenchmarkRecord(
            key=bench_key(spec.name, pass_, shape, name, figure),
            spec=spec.name, shape=dict(shape.dims), dtype=shape.dtype, scalars=dict(shape.scalars),
            pass_=pass_, implementation=name, figure=figure,
            samples_ms=times, timing=TIMING_METHOD if figure == "device" else WALL_TIMING_METHOD,
            median_ms=ms, iqr_ms=iqr(times),
            bytes=nbytes, flops=flops, gbps=gbps,
            pct_copy_bw=100 * gbps / roofline.copy_gbps if gbps and roofline else None,
            copy_same_size_ms=copy_ms,
            pct_same_size_copy=100 * copy_ms / ms if copy_ms and nbytes and ms > 0 else None,
            tflops=tflops,
            pct_matmul=100 * tflops / roofline.matmul_tflops if tflops and roofline else None,
            speedup_vs_eager=against["eager"][0],
            speedup_vs_compile=against["compile"][0],
            best_peer=best, speedup_vs_best_peer=vs_best,
            vs_best_peer=reading, speedup_vs_best_peer_ci=[_finite(low), _finite(high)] if best else None,
            recheck=recheck, recheck_detail=detail, peer=name in spec.perf.peers,
            launch_overhead=launch_overhead, warnings=tuple(warned.get(name, ())),
        ).to_json())
    return records
