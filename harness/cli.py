"""The ``harness`` command: list specs, verify kernels outside pytest, scaffold a kernel, replay a failure.

    harness list                         specs, implementations, dtypes and checks
    harness check [KERNEL ...]           property checks, one table per kernel (exit 1 on failure)
    harness new NAME                     scaffold kernel, reference, spec and docs for a new op
    harness repro CASE_JSON|FILE         replay one failing case
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness import profiles
from harness.device import configure_backend, describe, select_device

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


_CELL = {"passed": "[green]pass[/green]", "failed": "[bold red]FAIL[/bold red]", "skipped": "[dim]skip[/dim]",
         "xfailed": "[yellow]xfail[/yellow]", "xpassed": "[bold red]XPASS[/bold red]"}


def _cell(outcome) -> str:
    text = _CELL[outcome.status]
    if outcome.worst_score is not None and outcome.status == "passed":
        text += f" {outcome.worst_score:.2f}"
    return text


def outcome_tables(outcomes) -> list[Table]:
    """One table per kernel: rows implementation x dtype, columns checks, cells status + worst score."""
    tables = []
    for spec_name in dict.fromkeys(o.spec for o in outcomes):
        mine = [o for o in outcomes if o.spec == spec_name]
        checks = list(dict.fromkeys(o.check for o in mine))
        table = Table(title=f"{spec_name}  (cells: status and worst numerics score = kernel error / eager error)")
        table.add_column("implementation")
        table.add_column("dtype")
        for c in checks:
            table.add_column(c, justify="center")
        table.add_column("time", justify="right")
        for impl, dtype in dict.fromkeys((o.implementation, o.dtype) for o in mine):
            row = {o.check: o for o in mine if o.implementation == impl and o.dtype == dtype}
            seconds = sum(o.seconds for o in row.values())
            table.add_row(impl, dtype, *(_cell(row[c]) if c in row else "" for c in checks), f"{seconds:.1f}s")
        tables.append(table)
    return tables


def cmd_check(args: argparse.Namespace) -> int:
    from harness.io import atomic_write_text
    from harness.results import verify
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
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting", total=len(runs))

        def started(run) -> None:
            progress.update(task, description=run.label, completed=runs.index(run))

        seed = args.seed if args.seed is not None else profiles.seed_from_env()
        outcomes = verify(runs, seed=seed, on_start=started)
        progress.update(task, completed=len(runs))
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
    return 1 if bad else 0


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
        if Path(case).is_file():
            case, implementation, check = load_script(case)
        elif not case.lstrip().startswith("{"):
            raise ValueError(f"{case!r} is neither a repro script nor case JSON")
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    return 0 if replay(case, implementation=implementation or "triton", check=check or "forward") else 1


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

    p = sub.add_parser("new", help="scaffold a new kernel (kernel module, reference, spec, docs)")
    p.add_argument("name", help="op name, a Python identifier")
    p.add_argument("--root", default=".", help="project root to write into (default: .)")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("repro", help="replay one failing case from its JSON or repro script")
    p.add_argument("case", help="the case JSON printed with the failure, or the repro script's path")
    p.add_argument("--implementation", default=None, help="(with case JSON) default: triton")
    p.add_argument("--check", default=None, help="(with case JSON) default: forward")
    p.set_defaults(func=cmd_repro)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
