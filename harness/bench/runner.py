"""Benchmark one spec at its fixed shapes: kernel, eager and torch.compile timed side by side.

For every benchmark shape of a spec's performance model, and for the forward pass and the
forward+backward pass, each implementation of the spec, the eager reference and ``torch.compile``
of the reference are timed interleaved (``harness.bench.timing``) on fresh inputs. Afterwards each
kernel's result on those inputs is checked again against the reference under the error budget: a
kernel that skips work cannot win. Results are plain dicts in the results-file schema.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from harness.bench.roofline import Roofline
from harness.bench.timing import TIMING_METHOD, TimingPlan, iqr, median, time_interleaved
from harness.case import Case, TensorRecipe
from harness.checks import as_outputs, prepare, run_check
from harness.errors import describe_exception
from harness.layouts import Layout
from harness.runner import skip_reason
from harness.spec import BATCH, REFERENCE_IMPLEMENTATIONS, BenchShape, KernelSpec
from harness.values import drawn_on

PASSES = ("forward", "forward_backward")


def bench_key(spec: str, pass_: str, shape: BenchShape, implementation: str) -> str:
    dims = ",".join(f"{k}={v}" for k, v in sorted(shape.dims.items()))
    scalars = ",".join(f"{k}={v}" for k, v in sorted(shape.scalars.items()))
    return f"{spec}/{pass_}/{dims}{'/' + scalars if scalars else ''}/{shape.dtype}/{implementation}"


def bench_case(spec: KernelSpec, shape: BenchShape, seed: int) -> Case:
    """A contiguous case at a benchmark shape (no batch dims), with the spec's first value kind."""
    dims: dict[str, Any] = {BATCH: []} if BATCH in spec.dims else {}
    dims.update(shape.dims)
    tensors = {}
    for i, arg in enumerate(spec.tensors):
        shape_ = tuple(s for d in arg.dims if d != BATCH for s in [shape.dims[d]])
        tensors[arg.name] = TensorRecipe(shape_, arg.dtype or shape.dtype, Layout(), arg.values[0], seed * 131 + i)
    return Case(spec=spec.name, dtype=shape.dtype, dims=dims, tensors=tensors, scalars=dict(shape.scalars),
                grad_layout="contiguous", grad_seed=seed)


def bench_callables(spec: KernelSpec, device: torch.device) -> tuple[dict[str, Callable], dict[str, str]]:
    """Implementations that can run here, the spec's peers, and eager and torch.compile of the reference."""
    fns: dict[str, Callable] = {}
    skipped: dict[str, str] = {}
    for name, impl in spec.implementations.items():
        reason = skip_reason(spec, name, device)
        if reason:
            skipped[name] = reason
        else:
            fns[name] = impl.load()
    fns.update(spec.perf.peers if spec.perf is not None else {})
    fns["eager"] = spec.reference
    # dynamic=False compiles for each shape, and dynamo keeps its compiled entries on the
    # reference's code object, however many torch.compile wrappers there are: past its recompile
    # limit (8 entries: 4 shapes of forward and forward+backward) it would silently run eager in
    # the "compile" column. A reset per shape starts it afresh; Inductor's on-disk caches keep
    # the recompilation cheap.
    torch._dynamo.reset()
    fns["compile"] = torch.compile(spec.reference, dynamic=False)
    return fns, skipped


def timed_calls(spec: KernelSpec, fns: dict[str, Callable], cases: list[Case], device, pass_: str):
    """One call per implementation taking an input-set index, for the chosen pass."""
    names = spec.grad_inputs
    sets = []
    for case in cases:
        prepared = prepare(case, device)
        kwargs = prepared.kwargs(names if pass_ == "forward_backward" else ())
        grads = []
        if pass_ == "forward_backward":
            outs = [o for o in as_outputs(spec.reference(**prepared.copies(grad_names=names))) if o.requires_grad]
            grads = [case.grad_output_recipe(tuple(o.shape), str(o.dtype).removeprefix("torch.")).build(device).tensor for o in outs]
        sets.append((kwargs, grads))

    def make(fn):
        if pass_ == "forward":
            def call(i):
                with torch.no_grad():
                    return fn(**sets[i][0])
        else:
            def call(i):
                kwargs, grads = sets[i]
                outs = [o for o in as_outputs(fn(**kwargs)) if o.requires_grad]
                return torch.autograd.grad(outs, [kwargs[n] for n in names], grads[: len(outs)], allow_unused=True)
        return call

    return {name: make(fn) for name, fn in fns.items()}


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


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


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
               errors: list[str] | None = None, shape_timeout_s: float | None = None) -> list[dict]:
    """Benchmark every shape (only the ``quick`` ones if asked) and pass of ``spec``.

    With ``until`` (a ``time.monotonic()`` value) no new shape starts after it; the shapes left
    out are appended to ``not_run`` as readable labels, so a budgeted run says what it skipped.
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
                    records += _bench_shape(spec, shape, device, roofline, plan, on_case)
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
    if interrupted:
        raise BenchInterrupted(records)
    return records


class BenchInterrupted(KeyboardInterrupt):
    """An interrupted sweep, carrying the records measured before it (``records``)."""

    def __init__(self, records: list[dict]):
        super().__init__("benchmark sweep interrupted")
        self.records = records


def _bench_shape(spec: KernelSpec, shape: BenchShape, device: torch.device, roofline: Roofline | None,
                 plan: TimingPlan, on_case: Callable[[str], None] | None) -> list[dict]:
    """Both passes of one benchmark shape; progress lines say where the time went."""
    records: list[dict] = []
    fns, _ = bench_callables(spec, device)
    for pass_ in PASSES:
        if pass_ == "forward_backward" and not spec.grad_inputs:
            continue
        label = f"{spec.name} {pass_} {dict(shape.dims)} {shape.dtype}"
        if on_case:
            on_case(label)
        started = time.perf_counter()
        cases = [bench_case(spec, shape, seed) for seed in range(plan.input_sets)]
        nbytes = spec.perf.bytes_moved(shape.dims, shape.dtype)
        flops = spec.perf.flops(shape.dims, shape.dtype)
        if pass_ == "forward_backward":
            nbytes += (spec.perf.backward_bytes or spec.perf.bytes_moved)(shape.dims, shape.dtype)
            flops += (spec.perf.backward_flops or spec.perf.flops)(shape.dims, shape.dtype)
        calls = timed_calls(spec, fns, cases, device, pass_)
        calls[SAME_SIZE_COPY] = same_size_copy(nbytes, device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the inputs' time, not the first timed call's
        inputs_done = time.perf_counter()
        samples = time_interleaved(calls, device, plan)
        timed = time.perf_counter()
        del calls  # the timing's input sets: the re-checks below need the memory at large shapes
        if device.type == "cuda":
            torch.cuda.empty_cache()
        copy_ms = median(samples.pop(SAME_SIZE_COPY))
        medians = {n: median(s) for n, s in samples.items()}
        for name, times in samples.items():
            recheck, recheck_detail = "n/a", None
            peer = name in spec.perf.peers
            if name not in REFERENCE_IMPLEMENTATIONS and not peer:
                check = "forward" if pass_ == "forward" else "backward"
                result = run_check(spec, fns[name], check, cases[0], device)
                recheck = "passed" if result.passed else "failed"
                recheck_detail = None if result.passed else result.details().splitlines()[0]
            seconds = medians[name] / 1e3
            gbps = nbytes / seconds / 1e9 if seconds > 0 else None
            tflops = flops / seconds / 1e12 if flops and seconds > 0 else None
            records.append({
                "key": bench_key(spec.name, pass_, shape, name),
                "spec": spec.name, "shape": dict(shape.dims), "dtype": shape.dtype,
                "scalars": dict(shape.scalars), "pass": pass_, "implementation": name,
                "samples_ms": times, "timing": TIMING_METHOD, "median_ms": medians[name], "iqr_ms": iqr(times),
                "bytes": nbytes, "flops": flops, "gbps": gbps,
                "pct_copy_bw": 100 * gbps / roofline.copy_gbps if gbps and roofline else None,
                "copy_same_size_ms": copy_ms,
                "pct_same_size_copy": 100 * copy_ms / medians[name] if nbytes and medians[name] > 0 else None,
                "tflops": tflops,
                "pct_matmul": 100 * tflops / roofline.matmul_tflops if tflops and roofline else None,
                "speedup_vs_eager": _ratio(medians.get("eager"), medians[name]),
                "speedup_vs_compile": _ratio(medians.get("compile"), medians[name]),
                "recheck": recheck,
                **({"recheck_detail": recheck_detail} if recheck_detail else {}),
                **({"peer": True} if peer else {}),
            })
        if on_case:
            on_case(f"{label}: inputs {inputs_done - started:.1f} s, warm-up (compiles included) and timing "
                    f"{timed - inputs_done:.1f} s, re-checks {time.perf_counter() - timed:.1f} s")
    return records

