"""Compile ahead of timing, in parallel: the benchmark's warm-up calls made in worker processes.

Timing must have the GPU to itself, so benchmark cases run one after another; but before a case
can be timed, its kernel's Triton variants and ``torch.compile`` of its reference (forward, and
forward+backward) must be compiled, which costs seconds of CPU work per shape and, over a whole
sweep, far more than the timing itself. Both compilers keep on-disk caches shared by every process
of the machine (Triton's kernel cache; Inductor's FX graph and AOT autograd caches), so worker
processes (``harness.parallel.run_tasks``) can make those warm-up calls for all shapes at once, on
the GPU the benchmarks will use, and the timing process then finds every compilation cached and
spends its own time on what it is for.

A warm-up task that fails or runs out of time costs nothing but the time: the timing process
makes the same calls itself, and an error then surfaces where it is reported (the benchmark).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.parallel import run_tasks, worker_specs
from harness.spec import KernelSpec

# Warm-up workers hold a shape's inputs on the GPU at once. Compilation, not the GPU, is their
# bottleneck, so more workers help up to the CPU count; a worker that runs out of device memory
# (several large shapes at once) frees what it holds and tries again, OOM_TRIES times in all.
MAX_WARM_JOBS = 12
OOM_TRIES, OOM_WAIT_S = 4, 5.0


@dataclass(frozen=True)
class WarmTask:
    """The warm-up calls of one benchmark shape (both passes, every implementation and the
    compiled reference), run on CUDA device ``device_index``."""

    spec: str
    shape_index: int
    device_index: int
    label: str

    def run(self) -> dict:
        started = time.perf_counter()
        for attempt in range(1, OOM_TRIES + 1):
            try:
                self._calls()
                break
            except torch.OutOfMemoryError:
                if attempt == OOM_TRIES:
                    raise
            # out of the except block, the traceback's frames (and the tensors they hold) are gone
            torch.cuda.empty_cache()
            time.sleep(OOM_WAIT_S * attempt)  # the other workers' large shapes finish meanwhile
        return {"seconds": time.perf_counter() - started, "error": None}

    def _calls(self) -> None:
        import torch._inductor.config as inductor_config

        from harness.bench.runner import (
            PASSES,
            bench_callables,
            bench_case,
            timed_calls,
        )
        from harness.values import drawn_on

        spec = worker_specs()[self.spec]
        # Inductor's compiled code is keyed by the inputs' device too: warm on the timing GPU.
        device = torch.device("cuda", self.device_index)
        torch.cuda.set_device(device)
        # One compile thread per worker: the workers are the parallelism (Inductor would
        # otherwise start a pool of CPU-count processes in each). Not part of its cache key.
        inductor_config.compile_threads = 1
        shape = spec.perf.shapes[self.shape_index]
        with drawn_on(device):
            fns, _ = bench_callables(spec, device)
            cases = [bench_case(spec, shape, 0)]
            for pass_ in PASSES:
                if pass_ == "forward_backward" and not spec.grad_inputs:
                    continue
                for call in timed_calls(spec, fns, cases, device, pass_).values():
                    call(0)
        torch.cuda.synchronize(device)

    def crashed(self, what: str, inflight=None) -> dict:
        return {"seconds": None, "error": what}


def warm_tasks(specs: dict[str, KernelSpec], quick: bool, device: torch.device) -> list[WarmTask]:
    """One task per benchmark shape, in the order the benchmarks will run."""
    tasks = []
    for spec in specs.values():
        if spec.perf is None:
            continue
        for index, shape in enumerate(spec.perf.shapes):
            if quick and not shape.quick:
                continue
            label = f"{spec.name} {dict(shape.dims)} {shape.dtype}"
            tasks.append(WarmTask(spec.name, index, device.index or 0, label))
    return tasks


def warm_parallel(specs: dict[str, KernelSpec], quick: bool, device: torch.device, jobs: int,
                  deadline_s: float | None, progress: Callable[[str], None] = lambda s: None) -> dict:
    """Make every benchmark shape's warm-up calls in ``min(jobs, MAX_WARM_JOBS)`` processes within
    ``deadline_s``; returns counts for the results file (``shapes``, ``warmed``, ``failed``,
    ``seconds``)."""
    tasks = warm_tasks(specs, quick, device)
    jobs = min(jobs, MAX_WARM_JOBS)
    progress(f"compile warm-up of {len(tasks)} benchmark shapes in {jobs} processes"
             + (f" (time budget {deadline_s:.0f} s)" if deadline_s is not None else ""))

    def report(position: int, result: dict) -> None:
        task = tasks[position]
        if result["error"]:
            progress(f"warm-up {task.label}: failed ({result['error'].splitlines()[0]}); the benchmark compiles it itself")
        else:
            progress(f"warm-up {task.label}: {result['seconds']:.1f} s")

    started = time.monotonic()
    results = run_tasks(tasks, jobs, deadline_s, on_done=report) if tasks else {}
    return {"shapes": len(tasks), "warmed": sum(1 for r in results.values() if not r["error"]),
            "failed": sum(1 for r in results.values() if r["error"]), "seconds": time.monotonic() - started}
