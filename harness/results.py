"""Outcomes of property runs, as records the CLI prints and the reports read.

``verify`` runs a list of ``PropertyRun`` (skipping what cannot run here, expecting the known
failures) and returns one ``Outcome`` per run; it is the single place where statuses are decided,
so the terminal table, JSON results and pytest agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from harness.runner import CheckFailure, PropertyRun, skip_reason

PASSED, FAILED, SKIPPED, XFAILED, XPASSED = "passed", "failed", "skipped", "xfailed", "xpassed"
STATUSES = (PASSED, FAILED, SKIPPED, XFAILED, XPASSED)
FAILING = (FAILED, XPASSED)  # the statuses that make a run red
# The message of a check a verification time budget stopped (skipped, but not for a reason a user
# accepts: the reports call such a run incomplete rather than green).
BUDGET_MESSAGE = "not run: the verification time budget of {budget:g} s ran out before this check finished"
INTERRUPTED_MESSAGE = "not run: the run was interrupted (SIGTERM or Ctrl-C) before this check finished"
# Checks a run did not finish are skipped with a message that starts with one of these (for
# str.startswith): the verification time budget ran out, or the run was interrupted.
UNFINISHED_PREFIX = (BUDGET_MESSAGE.split("{")[0], INTERRUPTED_MESSAGE.split("(")[0])


def numerics_note(status: str, worst_score: float | None) -> bool:
    """A graded verdict between pass and fail: passed, but with a numerics score above 1, i.e.
    somewhere beyond eager's own error (within the spec's multiple of it). The reports show it, so
    a kernel drifting toward its budget is seen before it fails."""
    return status == PASSED and worst_score is not None and worst_score > 1.0


class VerificationInterrupted(KeyboardInterrupt):
    """Verification stopped by an interrupt; ``outcomes`` holds every check, those not finished
    skipped with ``INTERRUPTED_MESSAGE``, and ``cost`` what the finished ones cost."""

    def __init__(self, outcomes: list, cost: dict):
        super().__init__("verification interrupted")
        self.outcomes, self.cost = outcomes, cost


@dataclass
class Outcome:
    """What one (spec, implementation, dtype, check) property found."""

    spec: str
    implementation: str
    dtype: str
    check: str
    status: str
    examples: int = 0
    worst_score: float | None = None
    seconds: float = 0.0
    message: str = ""
    repro: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in (PASSED, SKIPPED, XFAILED)

    def to_json(self) -> dict:
        data = asdict(self)
        if data["worst_score"] is not None and not math.isfinite(data["worst_score"]):
            data["worst_score"] = None
        return data


def _verify_one(run: PropertyRun, seed: int | None, on_start: Callable[[PropertyRun], None] | None) -> Outcome:
    """One property's outcome; never raises for a kernel's failure."""
    if on_start:
        on_start(run)
    base = dict(spec=run.spec.name, implementation=run.implementation, dtype=run.dtype, check=run.check)
    reason = skip_reason(run.spec, run.implementation, run.device, run.check)
    if reason:
        return Outcome(**base, status=SKIPPED, message=reason)
    known = run.spec.known_failure(run.implementation, run.dtype, run.check)
    try:
        run.run(force_seed=seed)
    except CheckFailure as failure:
        status = XFAILED if known else FAILED
        message = f"known failure: {known.reason}\n{failure}" if known else str(failure)
        return Outcome(**base, status=status, examples=run.examples, worst_score=run.worst_score,
                       seconds=run.seconds, message=message, repro=failure.repro_path)
    status = XPASSED if known else PASSED
    message = f"expected to fail ({known.reason}) but passed: remove the known failure" if known else ""
    return Outcome(**base, status=status, examples=run.examples, worst_score=run.worst_score,
                   seconds=run.seconds, message=message)


def verify(runs: Iterable[PropertyRun], seed: int | None = None,
           on_start: Callable[[PropertyRun], None] | None = None) -> list[Outcome]:
    """Run each property and classify it; never raises for a kernel's failure. An interrupt raises
    ``VerificationInterrupted`` with every run's outcome, the unfinished ones skipped."""
    outcomes = []
    runs = list(runs)
    try:
        for run in runs:
            outcomes.append(_verify_one(run, seed, on_start))
    except KeyboardInterrupt:  # wherever it lands: in a check, in a progress line
        outcomes += [Outcome(spec=r.spec.name, implementation=r.implementation, dtype=r.dtype, check=r.check,
                             status=SKIPPED, message=INTERRUPTED_MESSAGE) for r in runs[len(outcomes):]]
        raise VerificationInterrupted(outcomes, {}) from None
    return outcomes
