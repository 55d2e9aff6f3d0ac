"""The nightly job: deep verification, benchmarks, the regression gate, and the reports.

``run_nightly`` verifies every spec under the chosen Hypothesis profile (``nightly`` by default),
counting time and Triton compilations per kernel; on a GPU it then measures the roofline, runs each
spec's benchmark sweep, and judges every timing against the recorded baseline. It writes one
results file (schema ``harness-results`` v1), appends one line to the run history, and renders the
HTML report, the Markdown summary and JUnit XML from them. Without a GPU the verification still
runs (through the interpreter) and the results say plainly that performance was not measured.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch

from harness import profiles
from harness.baseline import BaselineError, BaselineStore, timing_of
from harness.bench.roofline import measure
from harness.bench.runner import DEFAULT_SHAPE_TIMEOUT_S, BenchInterrupted, bench_spec
from harness.bench.timing import TimingPlan
from harness.bench.warm import warm_parallel
from harness.compiles import count_compilations
from harness.device import describe, on_gpu
from harness.io import atomic_write_text
from harness.numerics import finite_or_none
from harness.parallel import RunKey, verify_parallel
from harness.regression import decide, decide_between_moves, drift_limits, reference_drift, rule_for
from harness.results import INTERRUPTED_MESSAGE, UNFINISHED_PREFIX, SKIPPED, Outcome, VerificationInterrupted, verify
from harness.runner import property_runs
from harness.spec import REFERENCE_IMPLEMENTATIONS, KernelSpec, is_context

RESULTS_SCHEMA, RESULTS_VERSION = "harness-results", 1
DEFAULT_BASELINES = Path("benchmarks/baselines")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _commit() -> str | None:
    """The code a run measured: ``HARNESS_COMMIT`` where the runner sets it, else the checkout's
    commit with ``-dirty`` where tracked files differ from it. A copied working tree can carry a
    stale ``.git``: GPU runs of later code reported the commit the copy started from as their own."""
    if os.environ.get("HARNESS_COMMIT"):
        return os.environ["HARNESS_COMMIT"]
    try:
        # --exclude='*': the commit, never a tag's name
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7", "--exclude=*"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def software() -> dict:
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else describe(device)


def run_info(device: torch.device, profile: str, shard: str | None) -> dict:
    return {
        "id": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6],
        "started": _now(), "finished": None, "host": socket.gethostname(), "device": device_name(device),
        "gpu": device.type == "cuda", **software(), "commit": _commit(), "profile": profile, "shard": shard,
    }


def verify_specs(specs: dict[str, KernelSpec], device: torch.device, seed: int | None,
                 progress: Callable[[str], None], max_examples: int | None = None, *, profile: str = "nightly",
                 jobs: int | None = None, deadline_s: float | None = None) -> tuple[list, dict]:
    """Property checks per spec, with the wall time and Triton compilations each one cost.

    With ``jobs``, the checks run in that many worker processes (``harness.parallel``), each pinned
    to a GPU round-robin, and ``deadline_s`` bounds the whole verification."""
    if jobs is not None:
        keys = [RunKey(r.spec.name, r.implementation, r.dtype, r.check, max_examples)
                for spec in specs.values() for r in property_runs(spec, device, max_examples=max_examples)]
        progress(f"verify {len(keys)} properties in {jobs} processes"
                 + (f" (time budget {deadline_s:g} s)" if deadline_s is not None else ""))
        return verify_parallel(keys, jobs, profile, seed, deadline_s,
                               on_done=lambda key, outcome: progress(f"verified {key.label}: {outcome.status}"))
    if deadline_s is not None:
        raise ValueError("a verification time budget needs worker processes (jobs)")
    outcomes, cost = [], {}
    names = list(specs)
    for index, spec in enumerate(specs.values()):
        runs = property_runs(spec, device, max_examples=max_examples)
        start = time.perf_counter()
        try:
            with count_compilations() as compiled:
                outcomes += verify(runs, seed=seed, on_start=lambda r: progress(f"verify {r.label}"))
        except VerificationInterrupted as stop:  # every later spec's checks are unfinished too
            rest = [r for name in names[index + 1:] for r in property_runs(specs[name], device, max_examples=max_examples)]
            outcomes += stop.outcomes + [Outcome(spec=r.spec.name, implementation=r.implementation, dtype=r.dtype,
                                                 check=r.check, status=SKIPPED, message=INTERRUPTED_MESSAGE)
                                         for r in rest]
            cost[spec.name] = {"seconds": time.perf_counter() - start, "compilations": None}
            raise VerificationInterrupted(outcomes, cost) from None
        cost[spec.name] = {
            "seconds": time.perf_counter() - start,
            "compilations": sum(compiled.values()) if on_gpu(device) else None,
        }
    return outcomes, cost


def judge(benchmarks: list[dict], baseline: dict[str, dict] | None, unreadable: str | None) -> list[dict]:
    """One verdict per benchmark of an implementation under test (eager/compile are context, and
    measure the machine's drift against their own baselines: ``harness.regression``)."""
    def comparable(record: dict) -> dict | None:  # the baseline of this record, if timed the same way
        recorded = (baseline or {}).get(record["key"])
        return recorded if recorded is not None and timing_of(recorded) == timing_of(record) else None

    drift_ratios: dict[str, dict[str, float]] = {}  # benchmark (key without implementation) -> reference -> ratio
    for record in benchmarks:
        recorded = comparable(record)
        if record["implementation"] in REFERENCE_IMPLEMENTATIONS and recorded and recorded.get("median_ms"):
            drift_ratios.setdefault(record["key"].rsplit("/", 1)[0], {})[record["implementation"]] = (
                record["median_ms"] / recorded["median_ms"])
    verdicts = []
    for record in benchmarks:
        if is_context(record):
            continue
        base = dict(key=record["key"], spec=record["spec"], implementation=record["implementation"],
                    figure=record.get("figure", "device"), median_ms=record["median_ms"], ratio=None, ci_low=None, ci_high=None, p_value=None,
                    baseline_median_ms=None)
        if unreadable:
            verdicts.append({**base, "verdict": "baseline-unreadable", "reason": unreadable})
            continue
        recorded = (baseline or {}).get(record["key"])
        if recorded is None:
            verdicts.append({**base, "verdict": "no-baseline",
                             "reason": "no baseline recorded for this device and software; record one with --update-baseline"})
            continue
        if timing_of(recorded) != timing_of(record):
            verdicts.append({**base, "verdict": "no-baseline", "baseline_median_ms": recorded["median_ms"],
                             "reason": f"the baseline was timed by another method ({timing_of(recorded)}; this run: "
                                       f"{timing_of(record)}), and timings of two methods do not compare; "
                                       "re-record it with --update-baseline"})
            continue
        ratios = drift_ratios.get(record["key"].rsplit("/", 1)[0], {})
        drift, about = reference_drift(ratios, *drift_limits(record))
        if drift is None and ratios and record.get("figure") == "wall":  # a changed host: the references bracket it
            v, drift, about = decide_between_moves(recorded["samples_ms"], record["samples_ms"], rule_for(record), ratios)
        else:
            samples = record["samples_ms"] if drift is None else [t / drift for t in record["samples_ms"]]
            v = decide(recorded["samples_ms"], samples, rule_for(record))
        verdicts.append({**base, "verdict": v.verdict, "ratio": finite_or_none(v.ratio),
                         "ci_low": finite_or_none(v.ci_low), "ci_high": finite_or_none(v.ci_high),
                         "p_value": finite_or_none(v.p_value), "baseline_median_ms": recorded["median_ms"],
                         "drift": drift, "reason": f"{v.reason}; {about}" if about else v.reason})
    return verdicts


def benchmark_specs(specs: dict[str, KernelSpec], device: torch.device, quick: bool, baselines: Path,
                    update_baseline: bool, progress: Callable[[str], None], plan: TimingPlan = TimingPlan(),
                    force: bool = False, budget_s: float | None = None, jobs: int | None = None,
                    shape_timeout_s: float | None = DEFAULT_SHAPE_TIMEOUT_S) -> dict:
    """Roofline, benchmarks and verdicts (GPU only); optionally record the new baselines. With
    ``budget_s`` no benchmark shape starts once that many seconds have passed; the shapes left
    out are listed under ``not_benchmarked``. With ``jobs``, worker processes first compile what
    every shape needs (``harness.bench.warm``), within half of the budget, so that the timing
    process, which must run alone, finds it cached. A shape that raises, or runs past
    ``shape_timeout_s``, is listed under ``benchmark_errors`` and the sweep goes on."""
    started = time.monotonic()
    until = None if budget_s is None else started + budget_s
    warmup, roofline, interrupted = None, None, False
    try:
        if jobs is not None:
            warmup = warm_parallel(specs, quick, device, jobs, None if budget_s is None else budget_s / 2, progress)
            progress(f"compile warm-up: {warmup['warmed']} of {warmup['shapes']} shapes in {warmup['seconds']:.0f} s"
                     + (f", {warmup['failed']} failed" if warmup["failed"] else ""))
        roofline = measure(device.index or 0)
    except KeyboardInterrupt:  # before the sweep: every shape is listed as not benchmarked
        interrupted, until = True, started
        progress("interrupted before the benchmarks: writing the reports")
    benchmarks: list[dict] = []
    not_benchmarked: list[str] = []
    peers_not_timed: list[str] = []
    errors: list[str] = []
    for spec in specs.values():
        try:
            benchmarks += bench_spec(spec, device, roofline, quick=quick, plan=plan,
                                     on_case=lambda s: progress(f"bench {s}"), until=until, not_run=not_benchmarked,
                                     peers_not_timed=peers_not_timed,
                                     errors=errors, shape_timeout_s=shape_timeout_s)
        except BenchInterrupted as stop:  # keep what was measured; list the rest as not benchmarked
            benchmarks += stop.records
            until = time.monotonic()
            interrupted = True
            progress("benchmarks interrupted: writing what was measured")
    store = BaselineStore(baselines)
    versions = software()
    name = device_name(device)
    try:
        recorded, unreadable = store.load(name, versions["torch"], versions["triton"]), None
    except BaselineError as exc:
        recorded, unreadable = None, str(exc)
    regressions = judge(benchmarks, recorded, unreadable)
    update_error = None
    if update_baseline and not benchmarks:  # interrupted or cut off before any shape was measured
        update_error = "no benchmark was measured: no baseline recorded"
    elif update_baseline:
        try:
            store.update(name, versions["torch"], versions["triton"],
                         {b["key"]: b for b in benchmarks}, commit=_commit(), force=force)
        except BaselineError as exc:  # keep the measurements; say why nothing was recorded
            update_error = str(exc)
    return {"roofline": roofline.to_json() if roofline else None, "benchmarks": benchmarks, "regressions": regressions,
            "baseline_update_error": update_error, "not_benchmarked": not_benchmarked, "benchmark_errors": errors,
            "compile_warmup": warmup, "bench_interrupted": interrupted, "peers_not_timed": peers_not_timed}


def run_nightly(specs: dict[str, KernelSpec], device: torch.device, out_dir: Path, *, profile: str = "nightly",
                seed: int | None = None, quick: bool = False, bench: bool = True,
                baselines: Path = DEFAULT_BASELINES, update_baseline: bool = False, force: bool = False,
                history: Path | None = None,
                shard: str | None = None, max_examples: int | None = None, jobs: int | None = None,
                verify_deadline_s: float | None = None, bench_budget_s: float | None = None,
                shape_timeout_s: float | None = DEFAULT_SHAPE_TIMEOUT_S,
                progress: Callable[[str], None] = lambda s: None) -> dict:
    from harness.report import (
        append_history,
        history_entry,
        load_history,
        write_reports,
    )

    profiles.load(profile)
    examples = max_examples or profiles.max_examples_from_env()  # the run says which count it used
    run = run_info(device, profile + (f" (max {examples} examples)" if examples else ""), shard)
    incomplete = None
    try:
        outcomes, cost = verify_specs(specs, device, seed, progress, max_examples, profile=profile, jobs=jobs,
                                      deadline_s=verify_deadline_s)
    except VerificationInterrupted as stop:  # keep what finished; benchmark nothing; write every report
        outcomes, cost, incomplete = stop.outcomes, stop.cost, "interrupted during verification (SIGTERM or Ctrl-C)"
        progress("verification interrupted: writing the reports with what finished")
    results = {
        "schema": RESULTS_SCHEMA, "version": RESULTS_VERSION, "run": run,
        "verification": [o.to_json() for o in outcomes], "verification_cost": cost,
        "performance_measured": False, "roofline": None, "benchmarks": [], "regressions": [],
        "performance_note": "",
    }
    if incomplete:
        results["performance_note"] = "the run was interrupted before the benchmarks: performance was not measured"
    elif not on_gpu(device):
        results["performance_note"] = "no GPU: performance was not measured (verification ran in the Triton interpreter)"
    elif not bench:
        results["performance_note"] = "benchmarks were not requested (--no-bench): performance was not measured"
    else:
        results.update(benchmark_specs(specs, device, quick, baselines, update_baseline, progress, force=force,
                                       budget_s=bench_budget_s, jobs=jobs, shape_timeout_s=shape_timeout_s))
        results["performance_measured"] = True
        results["performance_note"] = "quick benchmark subset" if quick else "full benchmark sweep"
        if results["benchmark_errors"]:
            results["performance_note"] += f"; {len(results['benchmark_errors'])} shape(s) raised (listed)"
        if results.pop("bench_interrupted"):
            incomplete = "interrupted during the benchmarks (SIGTERM or Ctrl-C)"
            results["performance_note"] += f"; {incomplete}: the shapes not measured are listed"
        elif results["not_benchmarked"]:
            budget = f" of {bench_budget_s:g} s" if bench_budget_s else ""
            incomplete = f"the benchmark time budget{budget} ran out before {len(results['not_benchmarked'])} shape(s) started"
            results["performance_note"] += f"; {incomplete}"
    unfinished = sum(o.status == SKIPPED and o.message.startswith(UNFINISHED_PREFIX) for o in outcomes)
    if incomplete is None and unfinished:
        incomplete = f"the verification time budget ran out before {unfinished} check(s) finished"
    results["incomplete"] = incomplete
    run["finished"] = _now()
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "results.json", json.dumps(results, indent=1))
    history_path = history or out_dir / "history.jsonl"
    append_history(history_path, history_entry(results))
    write_reports(results, load_history(history_path), out_dir)
    return results
