"""The ``harness`` command: list specs, verify kernels outside pytest, scaffold a kernel, replay a failure.

    harness list                         specs, implementations, dtypes and checks
    harness check [KERNEL ...]           property checks, one table per kernel (exit 1 on failure)
    harness new NAME                     scaffold kernel, reference, spec and docs for a new op
    harness repro CASE_JSON|FILE         replay one failing case
    harness bench [KERNEL ...]           GPU benchmarks vs eager and torch.compile, judged against baselines
    harness nightly --out DIR            deep verification + benchmarks + reports (HTML, Markdown, JUnit, JSON)
    harness report RESULTS... --out DIR  re-render (and merge shards of) stored results
    harness record-baseline RESULTS      record a stored run's timings as its device's baseline
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness import profiles
from harness.bench.runner import DEFAULT_SHAPE_TIMEOUT_S
from harness.device import configure_backend, describe, select_device
from harness.results import numerics_note
from harness.validate import small_tiles

console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def _csv(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


def _load(names: list[str]):
    from harness.registry import RegistryError, load_specs, select
    from harness.spec import SpecError

    try:
        return select(load_specs(), names)
    except (RegistryError, SpecError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise SystemExit(2) from None


def cmd_list(args: argparse.Namespace) -> int:
    configure_backend()
    specs = _load(_csv(args.kernels))
    table = Table(title="kernel specs")
    for col in ("spec", "implementations", "dtypes", "checks", "description"):
        table.add_column(col)
    for spec in specs.values():
        impls = ", ".join(
            name + (" (CUDA only)" if impl.requires_cuda else "") for name, impl in spec.implementations.items()
        )
        table.add_row(spec.name, impls, ", ".join(spec.dtypes), ", ".join(spec.checks()), spec.description)
    console.print(table)
    return 0


def cmd_branches(args: argparse.Namespace) -> int:
    """The kernels' Triton branches a measured test run reached (harness.branches)."""
    from harness import branches

    data, kernel_dir = Path(args.data), Path(args.kernel_dir)
    if not data.is_file():
        console.print(f"[red]no coverage data at {data}: run the tests with coverage first "
                      f"(pip install pytest-cov; pytest --cov), or pass --data[/red]")
        return 2
    if not kernel_dir.is_dir():
        console.print(f"[red]--kernel-dir {kernel_dir} is not a folder[/red]")
        return 2
    reasons: dict[str, str] = {}
    for spec in _load(None).values():
        reasons.update(spec.unreached_on_cpu)
    totals, found = branches.measure(data, kernel_dir)
    known, unknown = branches.explained(found, reasons)
    unused = branches.stale(found, reasons)
    print(branches.render(totals, known, unknown, unused))
    return 1 if args.strict and (unknown or unused) else 0


_CELL = {"passed": "[green]pass[/green]", "failed": "[bold red]FAIL[/bold red]", "skipped": "[dim]skip[/dim]",
         "xfailed": "[yellow]xfail[/yellow]", "xpassed": "[bold red]XPASS[/bold red]"}


def _cell(outcome) -> str:
    text = _CELL[outcome.status]
    if numerics_note(outcome.status, outcome.worst_score):
        text += f" [yellow]{outcome.worst_score:.2f} note[/yellow]"
    elif outcome.worst_score is not None and outcome.status == "passed":
        text += f" {outcome.worst_score:.2f}"
    return text


WIDE_TABLE_COLUMNS = 120  # below this console width, the tables turn: one row per check


def outcome_tables(outcomes, width: int | None = None) -> list[Table]:
    """Tables of check outcomes, cells status + worst score. On a console of ``WIDE_TABLE_COLUMNS``
    or more: one per kernel, rows implementation x dtype, columns checks. Narrower (an 80-column
    terminal): one per kernel and implementation, rows checks, columns dtypes, so that nothing is
    cut."""
    width = console.width if width is None else width
    tables = []
    for spec_name in dict.fromkeys(o.spec for o in outcomes):
        mine = [o for o in outcomes if o.spec == spec_name]
        checks = list(dict.fromkeys(o.check for o in mine))
        variants = list(dict.fromkeys((o.implementation, o.dtype) for o in mine))
        cells = {(o.implementation, o.dtype, o.check): o for o in mine}
        seconds = {v: sum(o.seconds for o in mine if (o.implementation, o.dtype) == v) for v in variants}
        if width >= WIDE_TABLE_COLUMNS:
            table = Table(title=f"{spec_name}  (cells: status and worst numerics score = kernel error / eager error)")
            table.add_column("implementation")
            table.add_column("dtype")
            for c in checks:
                table.add_column(c, justify="center")
            table.add_column("time", justify="right")
            for impl, dtype in variants:
                table.add_row(impl, dtype, *(_cell(cells[impl, dtype, c]) if (impl, dtype, c) in cells else ""
                                             for c in checks), f"{seconds[impl, dtype]:.1f}s")
        else:
            for impl in dict.fromkeys(i for i, _ in variants):
                dtypes = [d for i, d in variants if i == impl]
                table = Table(title=f"{spec_name} [{impl}] (status, worst score = kernel error / eager's)")
                table.add_column("check", no_wrap=True)
                for dtype in dtypes:
                    table.add_column(dtype, justify="center", no_wrap=True)
                for c in checks:
                    table.add_row(c, *(_cell(cells[impl, d, c]) if (impl, d, c) in cells else "" for d in dtypes))
                table.add_row("time", *(f"{seconds[impl, d]:.1f}s" for d in dtypes))
                tables.append(table)
            continue
        tables.append(table)
    return tables


# Exit codes of harness check and harness nightly: 0 finished and green; 1 a check failed, a
# benchmark regressed or raised; 2 bad usage or input; 3 nothing failed, but the run did not finish
# (a time budget ran out, or SIGTERM / Ctrl-C stopped it): its reports cover what finished.
EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE = 1, 2, 3


def cmd_check(args: argparse.Namespace) -> int:
    from harness.io import atomic_write_text
    from harness.results import VerificationInterrupted, verify
    from harness.runner import property_runs

    configure_backend()
    profile = profiles.load(args.profile)
    device = select_device()
    specs = _load(_csv(args.kernels))
    runs = [
        r
        for spec in specs.values()
        for r in property_runs(spec, device, _csv(args.implementations) or None, _csv(args.dtypes) or None,
                               _csv(args.checks) or None)
    ]
    console.print(f"harness check: {len(runs)} properties on {describe(device)}, profile {profile!r}")
    seed = args.seed if args.seed is not None else profiles.seed_from_env()
    interrupted = False
    # a progress bar on a terminal; in a CI log, one flushed line as each property starts
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TimeElapsedColumn(), console=console, transient=True) if console.is_terminal else None
    with bar or contextlib.nullcontext():
        if bar is not None:
            task = bar.add_task("starting", total=len(runs))
            on_start = lambda run: bar.update(task, description=run.label, completed=runs.index(run))  # noqa: E731
        else:
            show = _progress_printer()
            on_start = lambda run: show(f"[{runs.index(run) + 1}/{len(runs)}] {run.label}")  # noqa: E731
        try:
            outcomes = verify(runs, seed=seed, on_start=on_start)
        except VerificationInterrupted as stop:
            outcomes, interrupted = stop.outcomes, True
    for table in outcome_tables(outcomes):
        console.print(table)
    bad = [o for o in outcomes if not o.ok]
    for o in bad:
        console.rule(f"[red]{o.spec}[{o.implementation}] {o.check} ({o.dtype})")
        console.print(o.message, markup=False)
    if args.json:
        payload = {"device": describe(device), "profile": profile, "outcomes": [o.to_json() for o in outcomes]}
        atomic_write_text(args.json, json.dumps(payload, indent=2))
    console.print(f"{sum(o.status == 'passed' for o in outcomes)} passed, {len(bad)} failed, "
                  f"{sum(o.status == 'skipped' for o in outcomes)} skipped")
    if interrupted:
        console.print("[yellow]interrupted:[/yellow] the properties not finished are reported as skipped")
    return EXIT_FAILED if bad else EXIT_INCOMPLETE if interrupted else 0


def cmd_new(args: argparse.Namespace) -> int:
    from harness.scaffold import ScaffoldError, scaffold

    try:
        written = scaffold(args.name, Path(args.root))
    except ScaffoldError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    for path in written:
        console.print(f"wrote {path}")
    console.print(f"next: harness check {args.name}")
    return 0


def cmd_repro(args: argparse.Namespace) -> int:
    from harness.repro import load_script, replay

    configure_backend()
    case, implementation, check = args.case, args.implementation, args.check
    try:
        # JSON first: a case's JSON is often longer than a file name may be, and asking the file
        # system about it raises OSError (ENAMETOOLONG) instead of answering "no such file".
        if case.lstrip().startswith("{"):
            pass
        elif Path(case).is_file():
            case, implementation, check = load_script(case)
        else:
            raise ValueError(f"{case!r} is neither a repro script nor case JSON")
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    return 0 if replay(case, implementation=implementation or "triton", check=check or "forward") else 1


def cmd_corpus(args: argparse.Namespace) -> int:
    """List the failure corpus, or add a case to it by hand (harness.corpus)."""
    from harness import corpus
    from harness.case import Case

    if args.action == "add":
        if not args.case:
            console.print("[red]error:[/red] harness corpus add needs the case JSON (as printed with a failure)")
            return EXIT_USAGE
        try:
            case = Case.from_json(json.loads(args.case))
        except (ValueError, KeyError, TypeError) as exc:
            console.print(f"[red]error:[/red] the case is not a harness case JSON: {exc}")
            return EXIT_USAGE
        path = corpus.add(case, args.implementation, args.check, "added by hand")
        console.print(escape(f"kept {path}: every run of {case.spec}[{args.implementation}] {args.check} "
                             f"({case.dtype}) replays it first until it passes"))
        return 0
    found = list(corpus.entries())
    for entry in found:
        label = f"{entry.case.spec}[{entry.implementation}] {entry.check} ({entry.case.dtype}): {entry.reason}"
        console.print(f"{escape(label)}  [dim]{escape(str(entry.path))}[/dim]")
    console.print(f"{len(found)} case(s) in {corpus.corpus_dir()}")
    return 0


def _progress_printer():
    def show(message: str) -> None:
        # escaped: labels such as "add_mul_act[cuda]" are not rich markup (unescaped, the
        # implementation's name vanished from the line)
        console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {escape(message)}", markup=True)
        sys.stdout.flush()  # a CI log shows each line as it happens, not at exit

    return show


def speedup_table(benchmarks: list[dict]) -> Table:
    table = Table(title="benchmarks (median ms; speed-up = reference time / this time)")
    for col in ("spec", "pass", "shape", "dtype", "figure", "impl", "median ms", "vs eager", "vs compile", "vs best peer",
                "GB/s", "% copy bw", "% same-size copy", "recheck"):
        table.add_column(col, justify="right" if col not in ("spec", "pass", "figure", "impl", "recheck") else "left")
    for b in benchmarks:
        shape = "x".join(str(v) for v in b["shape"].values())
        fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
        best = "" if b.get("speedup_vs_best_peer") is None else (
            f"{b['speedup_vs_best_peer']:.2f} ({b['best_peer']}{', ' + b['vs_best_peer'] if b.get('vs_best_peer') else ''})")
        table.add_row(b["spec"], b["pass"], shape, b["dtype"], b.get("figure", "device"), b["implementation"],
                      f"{b['median_ms']:.4f}", fmt(b["speedup_vs_eager"], ".2f"), fmt(b["speedup_vs_compile"], ".2f"),
                      best, fmt(b["gbps"], ".0f"),
                      fmt(b["pct_copy_bw"], ".1f"), fmt(b.get("pct_same_size_copy"), ".1f"), b["recheck"])
    return table


def cmd_bench(args: argparse.Namespace) -> int:
    from harness.nightly import benchmark_specs

    configure_backend()
    device = select_device()
    if device.type != "cuda":
        console.print("harness bench: no CUDA device here; performance can only be measured on a GPU (skipped)")
        return 0
    if small_tiles():
        console.print("[red]harness bench: HARNESS_SMALL_TILES is set, so the kernels run their small test tiles; "
                      "unset it to time what users run[/red]")
        return 2
    specs = _load(_csv(args.kernels))
    perf = benchmark_specs(specs, device, args.quick, Path(args.baselines), args.update_baseline,
                           _progress_printer(), force=args.force, budget_s=args.budget, jobs=args.jobs,
                           shape_timeout_s=args.shape_timeout)
    console.print(speedup_table(perf["benchmarks"]))
    for error in perf["benchmark_errors"]:
        console.print(f"[red]benchmark error:[/red] {escape(error)}")
    if perf["not_benchmarked"]:
        why = "interrupted" if perf["bench_interrupted"] else "the budget ran out"
        console.print(f"[yellow]not benchmarked[/yellow] ({why}): {', '.join(perf['not_benchmarked'])}")
    for peer in perf["peers_not_timed"]:
        console.print(f"[yellow]peer not timed:[/yellow] {escape(peer)}")
    flagged = [r for r in perf["regressions"] if r["verdict"] == "regression"]
    for r in perf["regressions"]:
        if r["verdict"] in ("regression", "improvement", "baseline-unreadable"):
            console.print(f"{r['verdict']}: {r['key']}: {r['reason']}", markup=False)
    if args.json:
        from harness.io import atomic_write_text

        atomic_write_text(args.json, json.dumps(perf, indent=1))
    if perf["baseline_update_error"]:
        console.print(f"[red]baseline not recorded:[/red] {perf['baseline_update_error']}")
        return EXIT_USAGE
    if flagged or perf["benchmark_errors"]:
        return EXIT_FAILED
    return EXIT_INCOMPLETE if perf["not_benchmarked"] else 0


def cmd_nightly(args: argparse.Namespace) -> int:
    from harness.nightly import run_nightly

    if args.verify_budget is not None and args.jobs is None:
        console.print("[red]error:[/red] --verify-budget needs --jobs (a budget stops worker processes)")
        return 2
    configure_backend()
    device = select_device()
    if device.type == "cuda" and not args.no_bench and small_tiles():
        console.print("[red]error:[/red] HARNESS_SMALL_TILES is set, so the kernels run their small test tiles: "
                      "unset it, or pass --no-bench to verify only")
        return 2
    specs = _load(_csv(args.kernels))
    out = Path(args.out)
    profile = args.profile
    if profile is None:
        profile = "nightly" if device.type == "cuda" else "ci"
        if profile == "ci":
            console.print("no GPU: verifying with the ci profile (8 examples a property); the nightly profile's 150 "
                          "run for hours under the Triton interpreter (--profile nightly to insist)")
    results = run_nightly(
        specs, device, out, profile=profile, seed=args.seed, quick=args.quick, bench=not args.no_bench,
        baselines=Path(args.baselines), update_baseline=args.update_baseline, force=args.force,
        history=Path(args.history) if args.history else None, shard=args.shard, max_examples=args.max_examples,
        jobs=args.jobs, verify_deadline_s=args.verify_budget, bench_budget_s=args.bench_budget,
        shape_timeout_s=args.shape_timeout,
        progress=_progress_printer(),
    )
    from harness.results import Outcome

    outcomes = [Outcome(**o) for o in results["verification"]]
    for table in outcome_tables(outcomes):
        console.print(table)
    if results["benchmarks"]:
        console.print(speedup_table(results["benchmarks"]))
    console.print(results["performance_note"])
    if results.get("baseline_update_error"):
        console.print(f"[red]baseline not recorded:[/red] {results['baseline_update_error']}")
    console.print(f"reports written to {out}/ (report.html, summary.md, junit.xml, results.json)")
    if results.get("incomplete"):
        console.print(f"[yellow]run incomplete:[/yellow] {escape(results['incomplete'])} "
                      f"(exit code {EXIT_INCOMPLETE} unless something failed)")
    bad = [o for o in outcomes if not o.ok]
    regressions = [r for r in results["regressions"] if r["verdict"] == "regression"]
    for error in results.get("benchmark_errors") or []:
        console.print(f"[red]benchmark error:[/red] {escape(error)}")
    if bad or regressions or results.get("benchmark_errors"):
        return EXIT_FAILED
    return EXIT_INCOMPLETE if results.get("incomplete") else 0


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import (
        ReportError,
        load_history,
        load_results,
        merge_results,
        write_reports,
    )

    try:
        results = merge_results([load_results(p) for p in args.results])
        history = load_history(Path(args.history)) if args.history else []
    except ReportError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    write_reports(results, history, Path(args.out))
    console.print(f"reports written to {args.out}/")
    return 0


def cmd_record_baseline(args: argparse.Namespace) -> int:
    """Record the timings of a stored results file as the baseline of the device that produced it."""
    from harness.baseline import BaselineError, BaselineStore
    from harness.report import ReportError, load_results

    try:
        results = load_results(args.results)
    except ReportError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    run = results["run"]
    if not results["benchmarks"]:
        console.print(f"[red]error:[/red] {args.results} holds no benchmarks (performance was not measured)")
        return 2
    records = {b["key"]: b for b in results["benchmarks"]}  # samples_ms, and timing where the run named it
    try:
        path = BaselineStore(Path(args.baselines)).update(run["device"], run["torch"], run["triton"], records,
                                                          commit=run.get("commit"), force=args.force)
    except (BaselineError, ValueError) as exc:  # ValueError: a record the store refuses (its timing, samples)
        console.print(f"[red]error:[/red] {exc}")
        return 2
    console.print(f"recorded {len(records)} baseline(s) from run {run['id']} into {path}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="verify fused kernels against their references")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list specs, their implementations and checks")
    p.add_argument("kernels", nargs="*")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("check", help="run the property checks and print a table per kernel")
    p.add_argument("kernels", nargs="*", help="spec names (default: all)")
    p.add_argument("--implementations", action="append", help="comma-separated implementation names")
    p.add_argument("--dtypes", action="append", help="comma-separated dtypes")
    p.add_argument("--checks", action="append", help="comma-separated checks")
    p.add_argument("--profile", choices=profiles.PROFILES, default=None, help="hypothesis profile (default: ci)")
    p.add_argument("--seed", type=int, default=None, help="draw cases from this seed")
    p.add_argument("--json", help="also write the outcomes to this JSON file")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("branches", help="which branches of the kernels' Triton code a measured test run reached")
    p.add_argument("--data", default=".coverage", help="coverage.py's data file (default: %(default)s)")
    p.add_argument("--kernel-dir", default="kernels", help="the folder of kernel modules (default: %(default)s)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 if a branch is neither reached nor explained by a spec, or a spec's reason explains none")
    p.set_defaults(func=cmd_branches)

    p = sub.add_parser("new", help="scaffold a new kernel (kernel module, reference, spec, docs)")
    p.add_argument("name", help="op name, a Python identifier")
    p.add_argument("--root", default=".", help="project root to write into (default: .)")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("repro", help="replay one failing case from its JSON or repro script")
    p.add_argument("case", help="the case JSON printed with the failure, or the repro script's path")
    p.add_argument("--implementation", default=None, help="(with case JSON) default: triton")
    p.add_argument("--check", default=None, help="(with case JSON) default: forward")
    p.set_defaults(func=cmd_repro)
    p = sub.add_parser("corpus", help="the failure corpus: cases replayed first by every run until they pass")
    p.add_argument("action", choices=("list", "add"))
    p.add_argument("case", nargs="?", help="(add) the case JSON printed with a failure")
    p.add_argument("--implementation", default="triton")
    p.add_argument("--check", default="forward")
    p.set_defaults(func=cmd_corpus)
    p = sub.add_parser("bench", help="benchmark kernels against eager and torch.compile (GPU only)")
    p.add_argument("kernels", nargs="*")
    p.add_argument("--quick", action="store_true", help="only the shapes marked quick")
    p.add_argument("--update-baseline", action="store_true", help="record these timings as the baseline")
    p.add_argument("--force", action="store_true",
                   help="with --update-baseline: replace a corrupt baseline file (kept as *.corrupt-<time>)")
    p.add_argument("--baselines", default="benchmarks/baselines", help="baseline directory")
    p.add_argument("--json", help="also write the benchmark records to this JSON file")
    p.add_argument("--jobs", type=_positive_int, default=None,
                   help="compile every shape's kernels and torch.compile ahead of timing in this many processes")
    p.add_argument("--budget", type=_positive_float, default=None, metavar="SECONDS",
                   help="start no benchmark shape after this long; the shapes left out are listed")
    p.add_argument("--shape-timeout", type=_positive_float, default=DEFAULT_SHAPE_TIMEOUT_S, metavar="SECONDS",
                   help="stop a benchmark shape after this long and go on with the next (default: %(default)g)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("nightly", help="deep verification, benchmarks, regression gate and reports")
    p.add_argument("kernels", nargs="*")
    p.add_argument("--out", required=True, help="directory for results.json, report.html, summary.md, junit.xml")
    p.add_argument("--profile", choices=profiles.PROFILES, default=None,
                   help="default: nightly on a GPU; ci under the interpreter (a CPU), where nightly takes hours")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--quick", action="store_true", help="benchmark only the quick shapes")
    p.add_argument("--no-bench", action="store_true", help="verification only")
    p.add_argument("--baselines", default="benchmarks/baselines")
    p.add_argument("--update-baseline", action="store_true")
    p.add_argument("--force", action="store_true", help="with --update-baseline: replace a corrupt baseline file")
    p.add_argument("--history", help="run history file (default: OUT/history.jsonl)")
    p.add_argument("--shard", help="name of this shard when several runners split the work")
    p.add_argument("--max-examples", type=int, default=None,
                   help="cap examples per property (when pytest -n auto already ran the deep verification)")
    p.add_argument("--jobs", type=_positive_int, default=None,
                   help="verify in this many worker processes, each pinned to a GPU round-robin, and "
                        "compile the benchmarks ahead of timing in up to 12 of them")
    p.add_argument("--verify-budget", type=_positive_float, default=None, metavar="SECONDS",
                   help="with --jobs: stop verification after this long; unfinished checks are reported as skipped")
    p.add_argument("--bench-budget", type=_positive_float, default=None, metavar="SECONDS",
                   help="start no benchmark shape after this long; the shapes left out are listed in the reports")
    p.add_argument("--shape-timeout", type=_positive_float, default=DEFAULT_SHAPE_TIMEOUT_S, metavar="SECONDS",
                   help="stop a benchmark shape after this long and go on with the next (default: %(default)g)")
    p.set_defaults(func=cmd_nightly)

    p = sub.add_parser("record-baseline", help="record a stored results file's timings as the baseline")
    p.add_argument("results", help="a results.json written by harness nightly on a GPU")
    p.add_argument("--baselines", default="benchmarks/baselines")
    p.add_argument("--force", action="store_true", help="replace a corrupt baseline file (kept as *.corrupt-<time>)")
    p.set_defaults(func=cmd_record_baseline)

    p = sub.add_parser("report", help="render reports from stored results, merging shards")
    p.add_argument("results", nargs="+", help="results.json files (several shards merge into one report)")
    p.add_argument("--out", required=True)
    p.add_argument("--history", help="run history to plot trends from")
    p.set_defaults(func=cmd_report)
    return parser


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM (a CI job's time limit, `timeout`) as Ctrl-C: a benchmark sweep then stops and still
    # writes what it measured, instead of dying with nothing written.
    signal.signal(signal.SIGTERM, _interrupt)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
