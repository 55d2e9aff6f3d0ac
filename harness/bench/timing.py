"""Timing on the GPU: CUDA events, L2 flushed before every repetition, rotating inputs, interleaving.

What is timed is the GPU's time from the start event to the end event. Python's own launch
overhead (argument checks, autograd bookkeeping, Triton's launcher, torch.compile's guards) is kept
out of it: before each start event the GPU is given a short spin (``torch.cuda._sleep``), during
which the CPU enqueues the whole call, so the GPU never idles waiting for the host inside the timed
region. That is what the roofline comparison needs; launch overhead is a separate question.

Each repetition times every implementation once, in an order rotated from one repetition to the
next, so that clock drift, thermal throttling or a noisy neighbour hit all of them alike and their
ratios stay honest. Before each timed call the L2 cache is flushed by writing a buffer twice its
size, and the call gets the next of several input sets, so neither the cache nor a lucky reuse of
the same addresses flatters a kernel. Warm-up calls come first (they also trigger compilation,
``torch.compile``'s included) and are not recorded.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

Call = Callable[[int], object]  # receives the input-set index


@dataclass(frozen=True)
class TimingPlan:
    warmup: int = 5
    repetitions: int = 40
    input_sets: int = 3
    flush_l2: bool = True
    spin_cycles: int = 2_000_000  # ~1 ms at Hopper clocks: longer than any call's host-side work


def _flush_buffer(device: torch.device) -> torch.Tensor:
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20) or (64 << 20)
    return torch.empty(2 * l2, dtype=torch.uint8, device=device)


def time_interleaved(calls: Mapping[str, Call], device: torch.device, plan: TimingPlan = TimingPlan()) -> dict[str, list[float]]:
    """Milliseconds per repetition for each named call, measured interleaved (module docstring)."""
    if device.type != "cuda":
        raise ValueError(f"timing needs a CUDA device, got {device}")
    names = list(calls)
    flush = _flush_buffer(device) if plan.flush_l2 else None
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
                    flush.zero_()
                if plan.spin_cycles:
                    torch.cuda._sleep(plan.spin_cycles)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                calls[name](rep % plan.input_sets)
                end.record()
                events[name].append((start, end))
        torch.cuda.synchronize()
    return {n: [s.elapsed_time(e) for s, e in pairs] for n, pairs in events.items()}


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def iqr(samples: list[float]) -> float:
    q = statistics.quantiles(samples, n=4)
    return q[2] - q[0]
