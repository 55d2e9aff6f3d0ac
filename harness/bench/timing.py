"""Timing on the GPU, two figures: device time (CUDA events, L2 flushed, the host hidden) and
per-call wall time (back-to-back calls, host included).

**Device time** (:func:`time_interleaved`):

What is timed is the GPU's time from the start event to the end event. Python's own launch
overhead (argument checks, autograd bookkeeping, Triton's launcher, torch.compile's guards) is kept
out of it: before each start event the GPU is given a short spin (``torch.cuda._sleep``), during
which the CPU enqueues the whole call, so the GPU never idles waiting for the host inside the timed
region. That is what the roofline comparison needs; launch overhead is a separate question.

Each repetition times every implementation once, in an order rotated from one repetition to the
next, so that clock drift, thermal throttling or a noisy neighbour hit all of them alike and their
ratios stay honest. Before each timed call the L2 cache is flushed, and the call gets the next of
several input sets, so neither the cache nor a lucky reuse of the same addresses flatters a kernel.
Warm-up calls come first (they also trigger compilation, ``torch.compile``'s included) and are not
recorded.

The flush reads a buffer twice L2's size that is never written, so it leaves L2 holding clean
lines: the lines it evicts (the previous call's outputs) are written back inside the flush, and the
timed call pays for its own traffic only, as under ncu, which writes back and invalidates L2
before a kernel. Flushing by writing (zeroing a buffer, as ``triton.testing.do_bench`` does) leaves
L2 full of dirty lines instead, and the timed call pays for writing them back as its loads and
stores evict them: up to L2's size of extra DRAM writes. On an H100 (benchmarks/results/
2026-11-24-h100-12, call 2) that capped every 33.5 MB op at 67% of the copy bandwidth, 33.5 MB
over 33.5 + 16.7 MB of write-backs: a 16.75 MiB copy took 17.2 us after a zeroing flush and 13.3
after a reading one, while a 1 GiB copy differs by 0.7%. The timed call's own writes may still sit
in L2 when its end event fires, as in ncu's kernel durations and as the next op of a model finds
them. Timings taken under different flushes do not compare, so each benchmark record and baseline
names its method (``TIMING_METHOD``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

Call = Callable[[int], object]  # receives the input-set index

# What a record timed with this module means; baselines recorded under another method (or under none,
# before records named theirs: L2 flushed by zeroing) are not compared with it.
TIMING_METHOD = "cuda-events/spin/l2-read-flush"
WALL_TIMING_METHOD = "wall/back-to-back/no-flush"


@dataclass(frozen=True)
class TimingPlan:
    warmup: int = 5
    repetitions: int = 40
    input_sets: int = 3
    flush_l2: bool = True
    spin_cycles: int = 2_000_000  # ~1 ms at Hopper clocks: longer than any call's host-side work
    # Batches per implementation (the regression rule wants >= 10 samples). Host-bound batches
    # spread widely (an interquartile range of 10-30% of the median for a norm's forward+backward
    # on an H200 host), and the sign test's interval of the paired ratio narrows as the square
    # root of the count: in one run, the first 30 of 60 batches read a layer_norm line as a tie,
    # 1.05 [0.99, 1.13], and all 60 as faster, 1.10 [1.02, 1.14]
    # (benchmarks/results/2026-11-29-h200-35, call 6).
    wall_repetitions: int = 60
    # A batch holds enough calls for about this much of the slowest implementation's device time
    # (at least WALL_MIN_CALLS calls); it lasts longer where the host bounds the calls.
    wall_batch_ms: float = 2.0


WALL_MIN_CALLS, WALL_MAX_CALLS = 10, 200


def wall_batch(per_call_ms: float, plan: TimingPlan) -> int:
    """Calls per wall-time batch for calls of about ``per_call_ms``: enough that the one
    synchronisation ending a batch weighs little, few enough that a large shape stays quick."""
    if not per_call_ms > 0:
        return WALL_MAX_CALLS
    return max(WALL_MIN_CALLS, min(WALL_MAX_CALLS, round(plan.wall_batch_ms / per_call_ms)))


def _l2_flush(device: torch.device) -> Callable[[], object]:
    """A call that leaves L2 clean and holding none of the timed inputs: a read of a buffer twice
    L2's size, written once here and never again (module docstring)."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20) or (64 << 20)
    buffer = torch.zeros(2 * l2 // 4, dtype=torch.float32, device=device)
    return lambda: buffer.sum()


def time_interleaved(calls: Mapping[str, Call], device: torch.device, plan: TimingPlan = TimingPlan()) -> dict[str, list[float]]:
    """Milliseconds per repetition for each named call, measured interleaved (module docstring)."""
    if device.type != "cuda":
        raise ValueError(f"timing needs a CUDA device, got {device}")
    names = list(calls)
    flush = _l2_flush(device) if plan.flush_l2 else None
    with torch.cuda.device(device):
        for i in range(plan.warmup):
            for name in names:
                calls[name](i % plan.input_sets)
        torch.cuda.synchronize()
        events: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = {n: [] for n in names}
        for rep in range(plan.repetitions):
            order = names[rep % len(names):] + names[: rep % len(names)]
            for name in order:
                if flush is not None:
                    flush()
                if plan.spin_cycles:
                    torch.cuda._sleep(plan.spin_cycles)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                calls[name](rep % plan.input_sets)
                end.record()
                events[name].append((start, end))
        torch.cuda.synchronize()
    return {n: [s.elapsed_time(e) for s, e in pairs] for n, pairs in events.items()}


def time_wall(calls: Mapping[str, Call], device: torch.device, batch: int,
              plan: TimingPlan = TimingPlan()) -> dict[str, list[float]]:
    """Milliseconds per call, host included, for each named call: ``plan.wall_repetitions``
    batches of ``batch`` back-to-back calls each, rotated over the calls (module docstring)."""
    if device.type != "cuda":
        raise ValueError(f"timing needs a CUDA device, got {device}")
    if batch < 1:
        raise ValueError(f"batch must be a positive number of calls, got {batch}")
    names = list(calls)
    samples: dict[str, list[float]] = {n: [] for n in names}
    with torch.cuda.device(device):
        for name in names:  # warm: the first calls of a fresh process pay for caches and allocations
            for i in range(plan.warmup):
                calls[name](i % plan.input_sets)
        torch.cuda.synchronize()
        for rep in range(plan.wall_repetitions):
            order = names[rep % len(names):] + names[: rep % len(names)]
            for name in order:
                call = calls[name]
                start = time.perf_counter()
                for i in range(batch):
                    call(i % plan.input_sets)
                torch.cuda.synchronize()
                samples[name].append((time.perf_counter() - start) * 1e3 / batch)
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def iqr(samples: list[float]) -> float:
    q = statistics.quantiles(samples, n=4)
    return q[2] - q[0]
