"""Work spread over worker processes, each pinned to one GPU, with an optional time budget.

``harness nightly`` on a GPU runner spends most of its time compiling (Triton variants of the
kernels, ``torch.compile`` of the references) and running references on the host, both of which
use one CPU core per process (``harness.device.share_cpu`` caps torch's host threads at each
worker's share of the cores). ``run_tasks`` runs picklable tasks in ``jobs`` worker processes
instead (started with ``spawn``, so CUDA is initialised in each worker, never inherited). Worker
``i`` pins GPU ``i mod count``, as xdist workers do under the pytest plugin, so
``CUDA_VISIBLE_DEVICES`` is honoured and several GPUs share the work. Without a GPU the workers run
the Triton interpreter on the CPU. Two kinds of task use it: the property checks
(``verify_parallel``) and the benchmarks' compile warm-up (``harness.bench.warm``).

With ``deadline_s`` the tasks that have not finished when it passes are stopped (the workers are
terminated) and left out of the results: the verification reports them as skipped, with that
reason, so a nightly job with a fixed slot still benchmarks and writes its reports instead of
being killed with nothing written. Checks are scheduled forward and backward first, for every
spec, so a budget that runs out leaves the cheaper safety checks unrun rather than whole kernels.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.device import share_cpu
from harness.errors import describe_exception
from harness.repro import crash_report, set_inflight
from harness.results import BUDGET_MESSAGE, FAILED, INTERRUPTED_MESSAGE, SKIPPED, Outcome, VerificationInterrupted

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


class Task(Protocol):
    """What a worker runs: picklable, with a label for progress lines."""

    label: str

    def run(self) -> Any:
        """Run in a worker process; the (picklable) result goes back to the parent."""

    def crashed(self, what: str, inflight: Path | None = None) -> Any:
        """In the parent: the result to record when the worker running this task raised or died
        (``inflight``: the dead worker's in-flight file, where it left one)."""


_worker_index: int | None = None
_worker_specs: dict | None = None


def worker_specs() -> dict:
    """Once per worker: pin its device (GPU ``index mod count``) and load the specs."""
    global _worker_specs
    if _worker_specs is None:
        from harness.device import select_device
        from harness.registry import load_specs

        select_device(f"gw{_worker_index or 0}")
        _worker_specs = load_specs()
    return _worker_specs


@dataclass(frozen=True)
class _VerifyTask:
    """One property run in a worker: its outcome (as JSON) and the Triton compilations it caused."""

    key: RunKey
    seed: int | None
    profile: str

    @property
    def label(self) -> str:
        return self.key.label

    def run(self) -> tuple[dict, int | None]:
        from harness import profiles
        from harness.compiles import count_compilations
        from harness.device import current_device, on_gpu
        from harness.results import verify
        from harness.runner import PropertyRun

        specs = worker_specs()
        profiles.load(self.profile)
        key = self.key
        if key.spec not in specs:
            raise KeyError(f"spec {key.spec!r} is not registered in the worker process (known: {sorted(specs)})")
        run = PropertyRun(specs[key.spec], key.implementation, key.dtype, key.check, current_device(),
                          max_examples=key.max_examples)
        with count_compilations() as compiled:
            (outcome,) = verify([run], seed=self.seed)
        return outcome.to_json(), sum(compiled.values()) if on_gpu() else None

    def crashed(self, what: str, inflight: Path | None = None) -> tuple[dict, None]:
        """The outcome of a task whose worker raised or died; ``inflight``, the dead worker's
        in-flight file, names the case it was running (``harness.repro.crash_report``)."""
        key = self.key
        message, repro = f"{key.label}: the worker process {what}", None
        if inflight is not None:
            about, repro = crash_report(inflight)
            message += f"; {about}"
        return Outcome(spec=key.spec, implementation=key.implementation, dtype=key.dtype, check=key.check,
                       status=FAILED, message=message, repro=repro).to_json(), None


_stopped = False


def _interrupt_on_sigterm(signum, frame) -> None:
    # KeyboardInterrupt, not SystemExit: Hypothesis takes SystemExit raised in a test for a
    # failure and replays the example (re-taking the locks just released), while an interrupt
    # stops it at once, as Ctrl-C does. The flag covers code that turns the interrupt into an
    # ordinary error (an extension module's import reports "initialization failed"): whatever
    # the task returns after this point is not a result.
    global _stopped
    _stopped = True
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def _worker_main(slot: int, conn, processes: int = 1, inflight: str | None = None) -> None:
    """A worker's loop: receive (position, task) over its pipe, run it, send (position, result)
    back; stop at ``None`` or when the pipe closes. Sends are synchronous, so a result is in the
    pipe before the next task starts. A task that raises gets ``task.crashed`` as its result.
    SIGTERM unwinds the worker (``finally`` blocks run), so a lock it holds, such as the CUDA
    extension build's, is released rather than left for every later process to wait on."""
    global _worker_index
    _worker_index = slot
    share_cpu(processes)
    if inflight:  # each case is written here before it runs: the parent names it if this process dies
        set_inflight(Path(inflight))
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        while (item := conn.recv()) is not None:
            position, task = item
            try:
                result = task.run()
            except Exception as exc:  # noqa: BLE001 - this task's failure; the worker goes on
                result = task.crashed(describe_exception(exc))
            if _stopped:
                return
            conn.send((position, result))
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


@dataclass
class _Worker:
    """The parent's view of one worker: its process, its end of the pipe, its GPU slot and the
    position of the task it is running (None when idle)."""

    slot: int
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    running: int | None = None


def run_tasks(tasks: Sequence[Task], jobs: int, deadline_s: float | None = None,
              on_done: Callable[[int, Any], None] | None = None) -> dict[int, Any]:
    """Run ``tasks`` (in this order) in ``jobs`` processes; return their results by position.
    Tasks cut off by ``deadline_s`` (seconds from now) are missing from the result. An interrupt
    stops the workers as the deadline does and raises ``TasksInterrupted`` with what was collected.

    Each worker is a plain process with a pipe of its own, over which the parent hands it one
    task at a time, so the parent always knows what every worker is running. A worker that dies
    (a segfault in a kernel, the OOM killer) gets ``task.crashed`` for the task it ran and is
    replaced on the same GPU slot. At the deadline, results already sent are still collected, then
    the workers are stopped (SIGTERM, then SIGKILL; ``_stop``) and nothing more is read from them.
    No ``multiprocessing.Pool``: its terminate can hang on queue locks that a busy worker holds.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    context = multiprocessing.get_context("spawn")
    inflight_dir = Path(tempfile.mkdtemp(prefix="harness-inflight-"))
    pending = list(range(len(tasks)))  # positions not yet handed out, in order
    workers: list[_Worker] = []
    done: dict[int, Any] = {}

    def finish(position: int, result: Any) -> None:
        done[position] = result
        if on_done:
            on_done(position, result)

    def hand_out(worker: _Worker) -> None:
        worker.running = pending.pop(0) if pending else None
        try:
            worker.conn.send(None if worker.running is None else (worker.running, tasks[worker.running]))
        except OSError:  # it died meanwhile (noticed through its sentinel): the task goes back
            if worker.running is not None:
                pending.insert(0, worker.running)
            worker.running = None

    def start(slot: int) -> None:
        parent_end, child_end = context.Pipe(duplex=True)
        inflight = inflight_dir / f"worker-{slot}.json"
        inflight.unlink(missing_ok=True)  # a replaced worker's leftover is not this worker's case
        process = context.Process(target=_worker_main, args=(slot, child_end, min(jobs, len(tasks)), str(inflight)),
                                  daemon=True, name=f"harness-worker-{slot}")
        process.start()
        child_end.close()  # the worker holds the only other end: its death reads as EOF
        worker = _Worker(slot, process, parent_end)
        workers.append(worker)
        hand_out(worker)

    def collect(worker: _Worker, more: bool = True) -> bool:
        """Read what the worker sent, handing it the next task (if ``more``); False once its
        pipe is closed (it exited)."""
        try:
            while worker.conn.poll():
                position, result = worker.conn.recv()
                finish(position, result)
                worker.running = None
                if more:
                    hand_out(worker)
        except (EOFError, OSError):
            return False
        return True

    def retire(worker: _Worker) -> None:
        """A worker exited: its task crashed; drop it from the live set."""
        worker.process.join(timeout=5)
        if worker.running is not None:
            inflight = inflight_dir / f"worker-{worker.slot}.json"
            finish(worker.running, tasks[worker.running].crashed(f"died (exit code {worker.process.exitcode})",
                                                                 inflight if inflight.exists() else None))
            worker.running = None
        worker.conn.close()
        workers.remove(worker)

    for slot in range(min(jobs, len(tasks))):
        start(slot)
    began = time.monotonic()
    interrupted = False
    try:
        while len(done) < len(tasks):
            remaining = None if deadline_s is None else deadline_s - (time.monotonic() - began)
            if remaining is not None and remaining <= 0:
                break
            live = [w for w in workers if w.process.is_alive() or w.conn.poll()]
            if not live:  # cannot happen while tasks remain: a dead worker is replaced
                break
            ready = set(multiprocessing.connection.wait(
                [w.conn for w in live] + [w.process.sentinel for w in live], timeout=remaining))
            for worker in live:
                if worker.conn in ready or worker.process.sentinel in ready:
                    alive = collect(worker)
                    if not alive or not worker.process.is_alive():
                        retire(worker)
                        if pending:
                            start(worker.slot)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where the CLI turns it into one
        interrupted = True
    finally:
        for worker in workers:  # results sent before the deadline still count
            collect(worker, more=False)
        _stop([w.process for w in workers])
        for worker in workers:  # nothing is read after the stop: see _interrupt_on_sigterm
            worker.conn.close()
        shutil.rmtree(inflight_dir, ignore_errors=True)
    if interrupted:
        raise TasksInterrupted(done)
    return done


class TasksInterrupted(KeyboardInterrupt):
    """``run_tasks`` stopped by an interrupt; ``done`` holds the results collected before it."""

    def __init__(self, done: dict[int, Any]):
        super().__init__("tasks interrupted")
        self.done = done


def verify_parallel(keys: Sequence[RunKey], jobs: int, profile: str, seed: int | None = None,
                    deadline_s: float | None = None,
                    on_done: Callable[[RunKey, Outcome], None] | None = None) -> tuple[list[Outcome], dict[str, dict]]:
    """Run the property checks ``keys`` in ``jobs`` processes (``run_tasks``); return the outcomes
    (in ``keys`` order) and the cost per spec (``seconds``: summed time of its properties,
    ``compilations``: summed count, or None under the interpreter). A check whose worker died
    fails; checks cut off by ``deadline_s`` come back skipped, with the reason."""
    ordered = sorted(keys, key=_priority)
    tasks = [_VerifyTask(key, seed, profile) for key in ordered]

    def report(position: int, result: tuple[dict, int | None]) -> None:
        if on_done:
            on_done(ordered[position], Outcome(**result[0]))

    try:
        results, unfinished = run_tasks(tasks, jobs, deadline_s, on_done=report), None
    except TasksInterrupted as stop:
        results, unfinished = stop.done, INTERRUPTED_MESSAGE
    if unfinished is None and deadline_s is not None:
        unfinished = BUDGET_MESSAGE.format(budget=deadline_s)
    done = {ordered[position]: (Outcome(**data), compiled) for position, (data, compiled) in results.items()}
    outcomes, cost = [], {}
    for key in keys:
        if key in done:
            outcome, compiled = done[key]
        else:
            outcome, compiled = Outcome(
                spec=key.spec, implementation=key.implementation, dtype=key.dtype, check=key.check, status=SKIPPED,
                message=unfinished or "",
            ), None
        outcomes.append(outcome)
        entry = cost.setdefault(key.spec, {"seconds": 0.0, "compilations": None})
        entry["seconds"] += outcome.seconds
        if compiled is not None:
            entry["compilations"] = (entry["compilations"] or 0) + compiled
    if unfinished == INTERRUPTED_MESSAGE:
        raise VerificationInterrupted(outcomes, cost)
    return outcomes, cost
