"""Running one check as a Hypothesis property, and turning its failure into something to act on.

``PropertyRun`` is the unit everything schedules: the pytest plugin makes one test of each, the CLI
runs them in a loop. It draws cases, runs the check, keeps the worst numerics score, and when a case
fails lets Hypothesis shrink it, then raises ``CheckFailure`` with the shrunk case, the error
statistics and a standalone repro script.

One exception to shrinking: a CUDA error that poisons the process's context (an illegal memory
access, a device-side assert). Every later call in the process then fails with the same error, so
Hypothesis would shrink to its simplest case, which has nothing to do with the fault: the H100
nightly twice reported flash attention's smallest case (seq 1) for an illegal access that no run of
that case reproduced. After such an error the property reports the case that raised it first.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from hypothesis import Phase, example, given, seed, settings

from harness import corpus
from harness.case import Case
from harness.checks import CheckResult, case_dtype_for
from harness.dispatch import run_check
from harness.device import lost_context, on_gpu
from harness.errors import describe_exception
from harness.graph_checks import GRAPH_CHECKS, GRAPH_EXAMPLES, GRAPH_EXAMPLES_INTERPRETED
from harness.repro import clear_inflight, record_inflight, write_repro
from harness.spec import KernelSpec
from harness.strategies import cases, tiling_examples

CONTRACT_EXAMPLES = 3  # each contract example already makes a dozen bad calls
# The checks that run a spec's tiling cases (``TilingCase``) first: those that judge what a kernel
# computes on a case. Not gradcheck (a numerical Jacobian of every input element: minutes under the
# interpreter at these sizes) nor the contract (bad calls, not cases).
TILING_CHECKS = ("forward", "backward", "unwritten", "guards", "determinism", "dropout")

STICKY_NOTE = ("this CUDA error leaves the process's context unusable, so every later case fails the "
               "same way: the case above is the first that raised it, not a shrunk one")


class CheckFailure(AssertionError):
    """A check failed on a (shrunk) case; ``str()`` is the full report a kernel author reads."""

    def __init__(self, run: PropertyRun, case: Case, result: CheckResult):
        self.run = run
        self.case = case
        self.result = result
        self.repro_path: str | None = None
        super().__init__(self.report())

    def report(self) -> str:
        lines = [
            f"{self.run.label} FAILED",
            "case:",
            *("  " + line for line in self.case.describe().splitlines()),
            "what went wrong:",
            *("  " + line for line in self.result.details().splitlines()),
            "reproduce:",
            f"  harness repro '{self.case.dumps()}' --implementation {self.run.implementation} --check {self.run.check}",
        ]
        if self.repro_path:
            lines.append(f"  python {self.repro_path}")
        return "\n".join(lines)

    def save_repro(self) -> str:
        self.repro_path = write_repro(self.case, self.run.implementation, self.run.check, self.report())
        self.args = (self.report(),)
        return self.repro_path


@dataclass
class PropertyRun:
    """One (spec, implementation, dtype, check) property and what running it found."""

    spec: KernelSpec
    implementation: str
    dtype: str
    check: str
    device: torch.device
    max_examples: int | None = None  # override the profile's count (e.g. to hunt a planted bug)
    shrink: bool = True  # False: report the first failing case as drawn (a check whose every case compiles)
    examples: int = 0
    worst_score: float | None = None
    seconds: float = 0.0
    scores: list[float] = field(default_factory=list)
    first_fault: tuple[Case, CheckResult] | None = None  # the case that poisoned the CUDA context
    # After a crash: None while the device still works, else its error (harness.device)
    context_probe: Callable[[torch.device], str | None] = lost_context

    @property
    def label(self) -> str:
        return f"{self.spec.name}[{self.implementation}] {self.check} ({case_dtype_for(self.check, self.dtype)})"

    @property
    def test_id(self) -> str:
        return f"{self.spec.name}-{self.implementation}-{self.dtype}-{self.check}"

    def _record(self, result: CheckResult) -> None:
        self.examples += 1
        if result.passed and result.score is not None:
            self.scores.append(result.score)
            self.worst_score = max(self.scores)

    def _settings(self, force_seed: int | None) -> settings:
        overrides: dict = {}
        if self.check == "contract":
            overrides["max_examples"] = min(settings.default.max_examples, CONTRACT_EXAMPLES)
        if self.check in GRAPH_CHECKS:  # fewer under the interpreter, where each compile costs seconds
            cap = GRAPH_EXAMPLES if on_gpu(self.device) else GRAPH_EXAMPLES_INTERPRETED
            overrides["max_examples"] = min(settings.default.max_examples, cap)
        if force_seed is not None:
            overrides["derandomize"] = False
        if self.max_examples is not None:
            overrides["max_examples"] = self.max_examples
        if not self.shrink:
            overrides["phases"] = tuple(p for p in settings.default.phases if p is not Phase.shrink)
        return settings(settings.default, **overrides)

    def run(self, force_seed: int | None = None) -> None:
        """Run the property; raise ``CheckFailure`` (with a saved repro script) when a case fails.
        The failure corpus's cases of this property run first (``harness.corpus``); a failing case
        joins it, and the property's cases leave it once they all pass."""
        fn = self.spec.implementations[self.implementation].load()
        case_dtype = case_dtype_for(self.check, self.dtype)
        strategy = cases(self.spec, case_dtype, on_gpu(self.device))
        replays = list(corpus.entries(self.spec.name, self.implementation, case_dtype, self.check))

        @self._settings(force_seed)
        @given(case=strategy)
        def property_(case: Case) -> None:
            if self.first_fault is not None:  # the context is poisoned: no later case means anything
                raise CheckFailure(self, *self.first_fault)
            record_inflight(case, self.implementation, self.check)  # named even if the process dies
            try:
                result = run_check(self.spec, fn, self.check, case, self.device)
            except Exception as exc:  # noqa: BLE001 - a crash on a case is a failure of that case
                result = CheckResult(self.check, False, problems=[describe_exception(exc)])
                if self.context_probe(self.device) is not None:
                    result.problems.append(STICKY_NOTE)
                    self.first_fault = (case, result)
            self._record(result)
            if not result.passed:
                raise CheckFailure(self, case, result)

        salt = int(hashlib.sha256(self.test_id.encode()).hexdigest()[:8], 16)
        if force_seed is not None:
            property_ = seed(force_seed ^ salt)(property_)
        elif settings.default.derandomize:
            # derandomized (the ci profile): Hypothesis would seed every check of a spec from the same
            # function and draw the same cases for all of them; a seed per property keeps each one
            # reproducible and gives forward, backward, guards and determinism cases of their own
            property_ = seed(salt)(property_)
        # Hypothesis's explicit examples, before any generated case: the failure corpus's cases,
        # then the spec's tiling cases (each path its kernel tiles by, whatever the draws)
        explicit = [entry.case for entry in replays]
        if self.check in TILING_CHECKS:
            explicit += tiling_examples(self.spec, case_dtype, on_gpu(self.device), salt)
        for case in reversed(explicit):
            property_ = example(case=case)(property_)
        start = time.perf_counter()
        try:
            property_()
        except CheckFailure as failure:
            failure.save_repro()
            self._remember(failure)
            raise
        except BaseExceptionGroup as group:  # several distinct failures: report the first of ours
            ours = group.subgroup(CheckFailure)
            if ours is None:
                raise
            first = ours.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            first.save_repro()
            self._remember(first)
            raise first from group
        else:
            for entry in replays:  # each passed: the bug it showed is gone
                corpus.drop(entry)
        finally:
            self.seconds = time.perf_counter() - start
            clear_inflight()  # reported the usual way (or not at all): no longer in flight
            release_cached_memory(self.device)

    def _remember(self, failure: CheckFailure) -> None:
        reason = (failure.result.details().strip().splitlines() or ["failed"])[0]
        corpus.add(failure.case, self.implementation, self.check, reason[:300])


def release_cached_memory(device: torch.device) -> None:
    """Hand the blocks torch's caching allocator keeps after a property back to the driver. Test
    workers share a GPU: a worker that once held a large case's buffers would otherwise keep them
    from the others for the rest of the run (the nightly profile on one 80 GB H100 with 12
    workers ran out of memory: benchmarks/results/2026-11-27-h100-16, calls 7 and 9)."""
    if device.type == "cuda" and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def property_runs(spec: KernelSpec, device: torch.device, implementations=None, dtypes=None, checks=None,
                  max_examples: int | None = None) -> list[PropertyRun]:
    """Every (implementation, dtype, check) of a spec, filtered; dtype-free checks run once."""
    runs = []
    for impl in spec.implementations:
        if implementations and impl not in implementations:
            continue
        for check in spec.checks():
            if checks and check not in checks:
                continue
            spec_dtypes = spec.float_dtypes
            dtype_list = [d for d in spec_dtypes if not dtypes or d in dtypes]
            if check in ("gradcheck", "contract") or (check in GRAPH_CHECKS and device.type != "cuda"):
                # dtype-free checks run once; so do the graph checks under the interpreter, where
                # they test tracing and dispatch (a dtype changes neither) and each case costs
                # seconds of compiling: the GPU runs them in every dtype
                dtype_list = dtype_list[:1] or ([] if dtypes else spec_dtypes[:1])
            for dtype in dtype_list:
                runs.append(PropertyRun(spec, impl, dtype, check, device, max_examples=max_examples))
    return runs


def skip_reason(spec: KernelSpec, implementation: str, device: torch.device, check: str | None = None) -> str | None:
    """Why an implementation (or one of its checks) cannot run here, or None."""
    impl = spec.implementations[implementation]
    if check == "cudagraph" and device.type != "cuda":
        return "CUDA graphs capture CUDA streams; this run uses the Triton interpreter on the CPU"
    if check == "opcheck" and not impl.custom_ops:
        return f"{spec.name}[{implementation}] is built of PyTorch's own ops (Implementation.custom_ops=False): no custom op to check"
    if (impl.requires_cuda or spec.requires_cuda) and device.type != "cuda":
        return f"{spec.name}[{implementation}] needs a CUDA device; this run uses the Triton interpreter on the CPU"
    if impl.min_compute_capability and device.type == "cuda":
        have = torch.cuda.get_device_capability(device)
        if have < impl.min_compute_capability:
            return f"{spec.name}[{implementation}] needs compute capability {impl.min_compute_capability}, device has {have}"
    return None
