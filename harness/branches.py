"""Which branches of the kernels' Triton code a test run reached, read from coverage.py's data.

Under Triton's interpreter a kernel runs as Python, so coverage.py sees its lines, and its branches:
``if SPLIT:`` on a constexpr is a plain Python ``if`` there. A CPU run measured with branch
coverage (``pytest --cov``: the project's coverage settings name the kernel folder and turn
branches on; ``--launch-coverage`` measures a few launches of each specialisation,
``harness/launch_coverage.py``) therefore says which paths of each Triton function the CPU suite
ran: rows of several column blocks, split reductions, partial tiles, and the rest.

:func:`unreached` lists every ``if``/``elif`` of a ``@triton.jit`` function (``@jit`` or
``@jit(...)`` of any module) that the run never reached, or never entered one of its ways, with
the function's name and the branch's source line. (An arc that leaves the function, the false
way of an ``if`` that closes it, is not judged: the interpreter's runs never record one.) A spec explains what its kernels cannot reach on the CPU in
``KernelSpec.unreached_on_cpu``, keyed ``"<function>: <branch line>"`` (the line as written, its
comment dropped); ``harness branches`` prints the report and, with ``--strict``, fails on any
branch that is neither reached nor explained.
"""

from __future__ import annotations

import ast
import json
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Branch:
    """An ``if``/``elif`` of a Triton function that a run did not take both ways."""

    file: str
    function: str
    line: int
    text: str  # the branch's line, stripped, without its comment
    never_reached: bool  # the branch line itself never ran (the whole function, or an outer branch)

    @property
    def key(self) -> str:
        return f"{self.function}: {self.text}"


@dataclass(frozen=True)
class FileCoverage:
    file: str
    statements: int
    missed: int
    branches: int
    partial: int

    @property
    def percent(self) -> float:
        total = self.statements + self.branches
        return 100.0 * (total - self.missed - self.partial) / total if total else 100.0


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "jit"


def jit_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each ``@...jit`` function in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            found.append((node.name, node.lineno, node.end_lineno or node.lineno))
    return found


def _branch_lines(source: str, first: int, last: int) -> dict[int, str]:
    """The ``if``/``elif`` lines between first and last, with their text (comment dropped)."""
    lines = source.splitlines()
    out = {}
    for number in range(first, last + 1):
        text = lines[number - 1].split("#", 1)[0].strip()
        if text.startswith(("if ", "elif ")):
            out[number] = text
    return out


def _json_report(data_file: Path, files: list[Path]) -> dict:
    import coverage  # optional: only this report needs it (pip install pytest-cov)

    cov = coverage.Coverage(data_file=str(data_file))
    cov.load()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "coverage.json"
        cov.json_report(morfs=[str(f) for f in files], outfile=str(out), ignore_errors=True)
        return json.loads(out.read_text())


def _triton_totals(rel: str, source: str, functions: list[tuple[str, int, int]], entry: dict | None) -> FileCoverage:
    """A module's totals over its Triton functions' lines alone: what the branch report is about,
    and all that a run with ``--launch-coverage`` measures (host code runs outside launches)."""
    inside = {n for _, first, last in functions for n in range(first, last + 1)}
    if entry is None:  # never imported by the run
        lines = source.splitlines()
        statements = [n for n in inside if lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")]
        return FileCoverage(rel, len(statements), len(statements), 0, 0)
    executed = [n for n in entry["executed_lines"] if n in inside]
    missed = [n for n in entry["missing_lines"] if n in inside]
    arcs_done = [a for a in entry.get("executed_branches", []) if a[0] in inside and a[1] > 0]
    arcs_missed = [a for a in entry.get("missing_branches", []) if a[0] in inside and a[1] > 0]
    partial = {a[0] for a in arcs_missed} & set(executed)
    return FileCoverage(rel, len(executed) + len(missed), len(missed), len(arcs_done) + len(arcs_missed), len(partial))


def measure(data_file: Path, kernel_dir: Path) -> tuple[list[FileCoverage], list[Branch]]:
    """Per-module totals over the Triton functions of the kernel modules under ``kernel_dir``
    (modules without one are left out), and every branch of those functions that the run behind
    ``data_file`` did not take both ways. Arcs out of a function are not counted: under the
    interpreter an arc out of a Triton function (the false arc of its last `if`) is never recorded,
    even where the condition is false on most calls (measured: `if DXB:` closing the norm
    backward, DXB false in nearly every case)."""
    files = sorted(p for p in kernel_dir.rglob("*.py") if p.name != "__init__.py")
    report = _json_report(data_file, files)
    by_path = {str(Path(name).resolve()): entry for name, entry in report["files"].items()}
    totals, branches = [], []
    for path in files:
        entry = by_path.get(str(path.resolve()))
        rel = str(path.relative_to(kernel_dir.parent)) if kernel_dir.parent in path.parents else str(path)
        source = path.read_text()
        functions = jit_functions(source)
        if not functions:
            continue
        totals.append(_triton_totals(rel, source, functions, entry))
        if entry is None:
            missing_lines, missing_from = set(range(1, len(source.splitlines()) + 1)), set()
        else:
            missing_lines = set(entry["missing_lines"])
            missing_from = {arc[0] for arc in entry.get("missing_branches", []) if arc[1] > 0}
        for name, first, last in functions:
            for number, text in _branch_lines(source, first, last).items():
                if number in missing_lines or number in missing_from:
                    branches.append(Branch(rel, name, number, text, number in missing_lines))
    return totals, branches


def explained(branches: Iterable[Branch], reasons: Mapping[str, str]) -> tuple[list[tuple[Branch, str]], list[Branch]]:
    """Split the branches into those a spec explains (with the reason) and the rest."""
    known, unknown = [], []
    for branch in branches:
        if branch.key in reasons:
            known.append((branch, reasons[branch.key]))
        else:
            unknown.append(branch)
    return known, unknown


def stale(branches: Iterable[Branch], reasons: Mapping[str, str]) -> list[str]:
    """The reasons that explain no branch of this run: the branch is now taken both ways (or is
    gone), and the reason should go."""
    keys = {branch.key for branch in branches}
    return sorted(key for key in reasons if key not in keys)


def render(totals: list[FileCoverage], known: list[tuple[Branch, str]], unknown: list[Branch],
           unused: list[str] = ()) -> str:
    """The report as text: per module, then the branches explained, then those that are not, then
    the reasons that explain nothing."""
    rows = [f"{'Triton functions of':36s} {'stmts':>6s} {'miss':>5s} {'branch':>6s} {'part':>5s} {'cover':>6s}"]
    for t in totals:
        rows.append(f"{t.file:36s} {t.statements:6d} {t.missed:5d} {t.branches:6d} {t.partial:5d} {t.percent:5.0f}%")
    if known:
        rows.append("")
        rows.append("Triton branches not taken both ways on this run, with the reason a spec gives:")
        rows += [f"  {b.file}:{b.line} {b.key}\n      {reason}" for b, reason in known]
    rows.append("")
    if unknown:
        rows.append(f"{len(unknown)} Triton branch(es) not taken both ways, and no spec says why "
                    "(KernelSpec.unreached_on_cpu, keyed as shown):")
        rows += [f"  {b.file}:{b.line} \"{b.key}\"{' (never reached)' if b.never_reached else ''}" for b in unknown]
    else:
        rows.append("Every branch of the kernels' Triton code was taken both ways, or a spec says why not.")
    if unused:
        rows.append(f"{len(unused)} reason(s) in KernelSpec.unreached_on_cpu explain no branch of this run "
                    "(taken both ways now, or gone): remove them")
        rows += [f'  "{key}"' for key in unused]
    return "\n".join(rows)
