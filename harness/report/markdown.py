"""A short Markdown summary of a run, fit for a CI comment (GitHub/GitLab flavoured).

A reviewer reads the headline and, only if it is red, the tables below it. So the comment holds the
counts, the failures, the regressions and improvements, and a trimmed speed-up table (fused
implementations only); everything else is in the HTML report. Tables are capped so a bad night
stays well under the comment size limits (GitHub: 65,536 characters).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from harness.bench.record import warned
from harness.io import atomic_write_text
from harness.report.model import (
    benchmark_groups,
    duration,
    failures,
    format_number,
    format_p,
    format_seconds,
    notes,
    summarize,
    validate_results,
)
from harness.spec import is_context

MAX_FAILURES = 25
MAX_VERDICTS = 40
MAX_SPEEDUPS = 40
MESSAGE_CHARS = 160


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped, no raw HTML."""
    value = " ".join(str(text).split())
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace("|", "\\|")


def _first_line(message: str) -> str:
    line = next((ln for ln in message.splitlines() if ln.strip()), "")
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], cap: int, what: str) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows[:cap]]
    if len(rows) > cap:
        lines.append(f"\n_… and {len(rows) - cap} more {what}: see the HTML report._")
    return lines


def _speedup(value: float | None) -> str:
    return format_number(value, 3, "×")


def _previous(results: Mapping, history: Sequence[Mapping] | None) -> Mapping | None:
    """The latest history entry of another run (the history may already hold this one)."""
    for entry in reversed(history or ()):
        if entry["run"]["id"] != results["run"]["id"]:
            return entry
    return None


def render_markdown(results: Mapping, history: Sequence[Mapping] | None = None) -> str:
    """The CI comment for ``results``; ``history`` (entries, oldest first) adds a since-last-run line."""
    validate_results(results)
    run, summary = results["run"], summarize(results)
    red = summary["failed"] or summary["xpassed"] or summary["regressions"]
    regressions = summary["regressions"]
    incomplete = results.get("incomplete")
    icon = "❌" if red else "⚠️" if summary["unfinished"] or incomplete else "✅"
    lines = [
        f"## {icon} Harness `{_cell(run['id'])}`: {summary['passed']} passed / "
        f"{summary['failed']} failed / {regressions} regression{'s' if regressions != 1 else ''}"
        + (f" / {summary['unfinished']} not run" if summary["unfinished"] else "")
        + (" (INCOMPLETE)" if incomplete else ""),
        "",
        " · ".join(_cell(x) for x in (
            run["device"], f"torch {run['torch']}", f"triton {run['triton']}",
            f"commit {run['commit']}" if run["commit"] else "no commit", f"profile {run['profile']}",
            format_seconds(duration(results)),
        )),
        "",
        f"Also: {summary['skipped']} skipped, {summary['xfailed']} xfailed (known failures), "
        f"{summary['xpassed']} xpassed, {summary['improvements']} improvement"
        f"{'s' if summary['improvements'] != 1 else ''}.",
    ]
    if incomplete:
        lines += ["", f"> ⚠️ **This run is incomplete:** {_cell(incomplete)}. What finished is reported; "
                      "what did not is listed as not run."]
    previous = _previous(results, history)
    if previous:
        was = previous["summary"]
        deltas = ", ".join(f"{key} {summary[key]} ({summary[key] - was[key]:+d})"
                           for key in ("passed", "failed", "regressions"))
        lines += ["", f"Since `{_cell(previous['run']['id'])}`: {deltas}."]
    if not results["performance_measured"]:
        note = _cell(results["performance_note"] or "no reason given")
        lines += ["", f"> ⚠️ **Performance was not measured:** {note}"]
    elif results.get("not_benchmarked"):
        left_out = ", ".join(_cell(label) for label in results["not_benchmarked"])
        lines += ["", f"> ⚠️ **Benchmarks are partial:** {_cell(results['performance_note'])}. Not measured: {left_out}"]
    if results.get("peers_not_timed"):
        lines += ["", "> ℹ️ **Peers not timed here:** " + "; ".join(_cell(p) for p in results["peers_not_timed"])]
    cautions = warned(results.get("benchmarks") or [])
    if cautions:
        lines += ["", f"> ⚠️ **Warnings on a first call ({len(cautions)}):** " + "; ".join(_cell(w) for w in cautions)]
    if results.get("benchmark_errors"):
        lines += ["", f"> ❌ **Benchmarks that raised ({len(results['benchmark_errors'])}):** "
                  + "; ".join(_cell(e) for e in results["benchmark_errors"])]

    bad = failures(results)
    if bad:
        rows = [(o["spec"], o["implementation"], o["dtype"], o["check"], o["status"],
                 format_number(o["worst_score"]), _first_line(o["message"]), o["repro"] or "—") for o in bad]
        lines += ["", f"### Failures ({len(bad)})", ""]
        lines += _table(("Kernel", "Implementation", "dtype", "Check", "Status", "Worst score", "Message", "Repro"),
                        rows, MAX_FAILURES, "failures")

    noted = notes(results)
    if noted:
        rows = [(o["spec"], o["implementation"], o["dtype"], o["check"], format_number(o["worst_score"])) for o in noted]
        lines += ["", f"### Numerics notes ({len(noted)})", "",
                  "Passed, but beyond eager's own error (a score above 1, within the spec's multiple of it): "
                  "a kernel drifting toward its budget."]
        lines += [""] + _table(("Kernel", "Implementation", "dtype", "Check", "Worst score"), rows, MAX_FAILURES, "notes")

    verdicts = sorted((r for r in results["regressions"] if r["verdict"] in ("regression", "improvement")),
                      key=lambda r: (r["verdict"] != "regression", -(r["ratio"] or 0)))
    if verdicts:
        rows = [(r["key"], r.get("figure", "device"), r["implementation"], ("🔴 " if r["verdict"] == "regression" else "🟢 ") + r["verdict"],
                 format_number(r["ratio"]),
                 f"[{format_number(r['ci_low'])}, {format_number(r['ci_high'])}]",
                 format_p(r["p_value"]), r["reason"]) for r in verdicts]
        lines += ["", "### Regressions & improvements", ""]
        lines += _table(("Benchmark", "Figure", "Implementation", "Verdict", "Ratio", "95% CI", "p", "Reason"),
                        rows, MAX_VERDICTS, "verdicts")

    if results["performance_measured"] and results["benchmarks"]:
        rows = [
            (case["spec"], case["shape"], case["dtype"], case["pass"], case["figure"], b["implementation"],
             format_number(b["median_ms"]), _speedup(b["speedup_vs_eager"]), _speedup(b["speedup_vs_compile"]),
             _best_peer(b), format_number(b["pct_copy_bw"], 3, "%"), format_number(b.get("pct_same_size_copy"), 3, "%"))
            for case, benches in benchmark_groups(results)
            for b in benches if not is_context(b)
        ]
        if rows:
            lines += ["", "### Speed-ups", ""]
            lines += ["Two figures: **device** time (CUDA events, L2 flushed, the host hidden) and per-call "
                      "**wall** time (back-to-back calls, host included). \"vs best peer\" divides the fastest of "
                      "eager, compile and the spec's peers by this time, repetition by repetition (the median of "
                      "those ratios); \"faster\" or \"slower\" only where its whole 95% interval (the sign "
                      "test's) lies past 1, else \"tie\".", ""]
            lines += _table(("Kernel", "Shape", "dtype", "Pass", "Figure", "Implementation", "Median ms", "vs eager",
                             "vs compile", "vs best peer", "% copy BW", "% same-size copy"), rows, MAX_SPEEDUPS,
                            "benchmarks")
    return "\n".join(lines) + "\n"


def _best_peer(bench: Mapping) -> str:
    """``0.93× (eager, slower)``: the speed-up against the fastest context implementation, named,
    with what its 95% interval says (a tie is a tie)."""
    if bench.get("speedup_vs_best_peer") is None:
        return "—"
    reading = f", {bench['vs_best_peer']}" if bench.get("vs_best_peer") else ""
    return f"{_speedup(bench['speedup_vs_best_peer'])} ({bench['best_peer']}{reading})"


def write_markdown(results: Mapping, path: str | os.PathLike, history: Sequence[Mapping] | None = None) -> None:
    """Write ``render_markdown`` to ``path``, atomically."""
    atomic_write_text(path, render_markdown(results, history))
