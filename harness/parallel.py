"""Verification spread over worker processes, each pinned to one GPU, with an optional time budget.

``harness nightly`` on a GPU runner spends most of its verification time compiling Triton variants
and running references on the host, both of which use one CPU core per process. ``verify_parallel``
runs the property checks in ``jobs`` worker processes instead (started with ``spawn``, so CUDA is
initialised in each worker, never inherited). Worker ``i`` pins GPU ``i mod count``, as xdist
workers do under the pytest plugin, so ``CUDA_VISIBLE_DEVICES`` is honoured and several GPUs share
the work. Without a GPU the workers run the Triton interpreter on the CPU.

With ``deadline_s`` the checks that have not finished when it passes are stopped (the workers are
terminated) and reported as skipped, with that reason: a nightly job with a fixed slot then still
benchmarks and writes its reports instead of being killed with nothing written. Checks are
scheduled forward and backward first, for every spec, so a budget that runs out leaves the cheaper
safety checks unrun rather than whole kernels.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.results import FAILED, SKIPPED, UNFINISHED_PREFIX, Outcome

# Scheduling order: the checks that prove equivalence first.
_CHECK_PRIORITY = ("forward", "backward", "dropout", "gradcheck", "unwritten", "guards", "determinism", "contract")


@dataclass(frozen=True)
class RunKey:
    """A picklable name for one property run (the spec itself holds lambdas and stays behind)."""

    spec: str
    implementation: str
    dtype: str
    check: str
    max_examples: int | None = None

    @property
    def label(self) -> str:
        return f"{self.spec}[{self.implementation}] {self.check} ({self.dtype})"


def _priority(key: RunKey) -> int:
    return _CHECK_PRIORITY.index(key.check) if key.check in _CHECK_PRIORITY else len(_CHECK_PRIORITY)


# ---- the worker side ----------------------------------------------------------------------------

_worker_index: int | None = None
_worker_specs: dict | None = None


def _setup_worker(profile: str) -> dict:
    """Once per worker: pin its device (GPU ``index mod count``), load the profile and the specs."""
    global _worker_specs
    if _worker_specs is None:
        from harness import profiles
        from harness.device import select_device
        from harness.registry import load_specs

        select_device(f"gw{_worker_index or 0}")
        profiles.load(profile)
        _worker_specs = load_specs()
    return _worker_specs


def _run_one(key: RunKey, seed: int | None, profile: str) -> tuple[dict, int | None]:
    """Run one property in this worker: its outcome (as JSON) and the Triton compilations it caused."""
    from harness.compiles import count_compilations
    from harness.device import current_device, on_gpu
    from harness.results import verify
    from harness.runner import PropertyRun

    specs = _setup_worker(profile)
    if key.spec not in specs:
        raise KeyError(f"spec {key.spec!r} is not registered in the worker process (known: {sorted(specs)})")
    run = PropertyRun(specs[key.spec], key.implementation, key.dtype, key.check, current_device(),
                      max_examples=key.max_examples)
    with count_compilations() as compiled:
        (outcome,) = verify([run], seed=seed)
    return outcome.to_json(), sum(compiled.values()) if on_gpu() else None


_stopped = False


def _interrupt_on_sigterm(signum, frame) -> None:
    # KeyboardInterrupt, not SystemExit: Hypothesis takes SystemExit raised in a test for a
    # failure and replays the example (re-taking the locks just released), while an interrupt
    # stops it at once, as Ctrl-C does. The flag covers code that turns the interrupt into an
    # ordinary error (an extension module's import reports "initialization failed"): whatever
    # the property returns after this point is not a result.
    global _stopped
    _stopped = True
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def _worker_main(slot: int, conn, seed: int | None, profile: str) -> None:
    """A worker's loop: receive (position, key) over its pipe, run it, send (position, outcome,
    compilations) back; stop at ``None`` or when the pipe closes. Sends are synchronous, so a
    result is in the pipe before the next task starts. SIGTERM unwinds the worker (``finally``
    blocks run), so a lock it holds, such as the CUDA extension build's, is released rather than
    left for every later process to wait on."""
    global _worker_index
    _worker_index = slot
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        while (item := conn.recv()) is not None:
            position, key = item
            try:
                data, compiled = _run_one(key, seed, profile)
            except Exception as exc:  # noqa: BLE001 - reported as this property's failure; the worker goes on
                data, compiled = _crashed(key, f"raised {type(exc).__name__}: {exc}"), None
            if _stopped:
                return
            conn.send((position, data, compiled))
    except (KeyboardInterrupt, EOFError):  # stopped by the parent (or Ctrl-C), or the parent is gone
        return


# ---- the parent side ----------------------------------------------------------------------------


def _stop(workers: list, grace_s: float = 10.0) -> None:
    """SIGTERM every worker (they unwind, releasing locks), then SIGKILL what is left after
    ``grace_s`` (a worker stuck in a driver call or a C extension)."""
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    until = time.monotonic() + grace_s
    for worker in workers:
        worker.join(timeout=max(0.0, until - time.monotonic()))
    for worker in workers:
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)


def _crashed(key: RunKey, what: str) -> dict:
    return Outcome(spec=key.spec, implementation=key.implementation, dtype=key.dtype, check=key.check,
                   status=FAILED, message=f"{key.label}: the worker process {what}").to_json()


@dataclass
class _Worker:
    """The parent's view of one worker: its process, its end of the pipe, its GPU slot and the
    position of the property it is running (None when idle)."""

    slot: int
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    running: int | None = None


def verify_parallel(keys: Sequence[RunKey], jobs: int, profile: str, seed: int | None = None,
                    deadline_s: float | None = None,
                    on_done: Callable[[RunKey, Outcome], None] | None = None) -> tuple[list[Outcome], dict[str, dict]]:
    """Run ``keys`` in ``jobs`` processes; return the outcomes (in ``keys`` order) and the cost per
    spec (``seconds``: summed time of its properties, ``compilations``: summed count, or None under
    the interpreter). Properties cut off by ``deadline_s`` come back skipped, with the reason.

    Each worker is a plain process with a pipe of its own, over which the parent hands it one
    property at a time, so the parent always knows what every worker is running. A worker that
    dies (a segfault in a kernel, the OOM killer) fails that property and is replaced on the same
    GPU slot. At the deadline, results already sent are still collected, then the workers are
    stopped (SIGTERM, then SIGKILL; ``_stop``) and nothing more is read from them. No
    ``multiprocessing.Pool``: its terminate can hang on queue locks that a busy worker holds.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    ordered = sorted(keys, key=_priority)
    context = multiprocessing.get_context("spawn")
    pending = list(range(len(ordered)))  # positions not yet handed out, in scheduling order
    workers: list[_Worker] = []
    done: dict[RunKey, tuple[Outcome, int | None]] = {}

    def finish(position: int, data: dict, compiled: int | None) -> None:
        key = ordered[position]
        done[key] = (Outcome(**data), compiled)
        if on_done:
            on_done(key, done[key][0])

    def hand_out(worker: _Worker) -> None:
        worker.running = pending.pop(0) if pending else None
        try:
            worker.conn.send(None if worker.running is None else (worker.running, ordered[worker.running]))
        except OSError:  # it died meanwhile (noticed through its sentinel): the property goes back
            if worker.running is not None:
                pending.insert(0, worker.running)
            worker.running = None

    def start(slot: int) -> None:
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(target=_worker_main, args=(slot, child_end, seed, profile), daemon=True,
                                  name=f"harness-verify-{slot}")
        process.start()
        child_end.close()  # the worker holds the only other end: its death reads as EOF
        worker = _Worker(slot, process, parent_end)
        workers.append(worker)
        hand_out(worker)

    def collect(worker: _Worker, more: bool = True) -> bool:
        """Read what the worker sent, handing it the next property (if ``more``); False once its
        pipe is closed (it exited)."""
        try:
            while worker.conn.poll():
                position, data, compiled = worker.conn.recv()
                finish(position, data, compiled)
                worker.running = None
                if more:
                    hand_out(worker)
        except (EOFError, OSError):
            return False
        return True

    for slot in range(min(jobs, len(ordered))):
        start(slot)
    began = time.monotonic()
    try:
        while len(done) < len(ordered):
            remaining = None if deadline_s is None else deadline_s - (time.monotonic() - began)
            if remaining is not None and remaining <= 0:
                break
            live = [w for w in workers if w.process.is_alive() or w.conn.poll()]
            if not live:  # cannot happen while properties remain: a dead worker is replaced
                break
            ready = set(multiprocessing.connection.wait(
                [w.conn for w in live] + [w.process.sentinel for w in live], timeout=remaining))
            for worker in live:
                if worker.conn in ready or worker.process.sentinel in ready:
                    alive = collect(worker)
                    if not alive or not worker.process.is_alive():
                        _retire(worker, workers, finish, ordered)
                        if pending:
                            start(worker.slot)
    finally:
        for worker in workers:  # results sent before the deadline still count
            collect(worker, more=False)
        _stop([w.process for w in workers])
        for worker in workers:  # nothing is read after the stop: see _interrupt_on_sigterm
            worker.conn.close()
    outcomes, cost = [], {}
    for key in keys:
        if key in done:
            outcome, compiled = done[key]
        else:
            outcome, compiled = Outcome(
                spec=key.spec, implementation=key.implementation, dtype=key.dtype, check=key.check, status=SKIPPED,
                message=f"{UNFINISHED_PREFIX} of {deadline_s:g} s ran out before this check finished",
            ), None
        outcomes.append(outcome)
        entry = cost.setdefault(key.spec, {"seconds": 0.0, "compilations": None})
        entry["seconds"] += outcome.seconds
        if compiled is not None:
            entry["compilations"] = (entry["compilations"] or 0) + compiled
    return outcomes, cost


def _retire(worker: _Worker, workers: list[_Worker], finish, ordered) -> None:
    """A worker exited: fail the property it was running, and drop it from the live set."""
    worker.process.join(timeout=5)
    if worker.running is not None:
        finish(worker.running, _crashed(ordered[worker.running], f"died (exit code {worker.process.exitcode})"), None)
        worker.running = None
    worker.conn.close()
    workers.remove(worker)
