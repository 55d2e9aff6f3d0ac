"""The HTML report: one static, self-contained page per run.

The page is archived as a CI artifact and opened from anywhere, years later, possibly offline, so
it depends on nothing: the CSS is inline and the plots are PNGs (matplotlib, Agg) embedded as
base64 ``data:`` URIs. The template is rendered with autoescaping on, because kernel failure
messages quote user-controlled text (case JSON, tensor reprs with ``<`` and ``&``).

This module prepares plain view data (tables as lists of dicts, plots as base64 strings) and the
template only lays it out; all decisions (what is a failure, how rows are grouped and sorted) live
here or in ``harness.report.model``.
"""

from __future__ import annotations

import base64
import io
import math
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from harness.bench.record import warned
from harness.io import atomic_write_text
from harness.report.model import (
    numerics_note,
    STATUSES,
    benchmark_groups,
    duration,
    failures,
    format_number,
    format_p,
    format_seconds,
    history_entry,
    implementation_order,
    parse_time,
    summarize,
    validate_results,
)
from harness.spec import CHECKS, is_context

TEMPLATE = "report.html.j2"
TREND_RUNS = 60  # trends show the latest runs only: older points are noise at nightly granularity
TREND_KEYS_PER_SPEC = 30
BAR_CASES_PER_SPEC = 40
_STATUS_LABELS = {"passed": "pass", "failed": "FAIL", "skipped": "skip", "xfailed": "xfail", "xpassed": "XPASS"}
_VERDICT_ORDER = ("regression", "improvement", "baseline-unreadable", "insufficient-data", "no-baseline",
                  "unchanged")
_IMPL_COLOURS = {"triton": "#1f77b4", "cuda": "#9467bd", "compile": "#ff7f0e", "eager": "#7f7f7f"}
_SPARE_COLOURS = ("#2ca02c", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#d62728")


def _require(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError as exc:
        raise ImportError(f"the HTML report needs {module}: pip install 'fused-kernel-harness[report]'") from exc


@lru_cache(maxsize=1)
def _template():
    jinja2 = _require("jinja2")
    source = resources.files("harness.report").joinpath("templates", TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    return env.from_string(source)


# --- plots --------------------------------------------------------------------------------------------

def _figure(width: float, height: float):
    """A matplotlib Figure not attached to pyplot: no global state, no GUI backend, thread-safe."""
    _require("matplotlib")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _colour(implementation: str, known: list[str]) -> str:
    if implementation in _IMPL_COLOURS:
        return _IMPL_COLOURS[implementation]
    if implementation not in known:
        known.append(implementation)
    return _SPARE_COLOURS[known.index(implementation) % len(_SPARE_COLOURS)]


def _bandwidth_plot(spec: str, cases: list[tuple[dict, list[dict]]]) -> str | None:
    """Horizontal grouped bars: % of measured copy bandwidth per case (shape, dtype, pass) and implementation."""
    cases = [(c, [b for b in benches if b["pct_copy_bw"] is not None]) for c, benches in cases]
    cases = [(c, benches) for c, benches in cases if benches][:BAR_CASES_PER_SPEC]
    if not cases:
        return None
    impls = sorted({b["implementation"] for _, benches in cases for b in benches}, key=implementation_order)
    spare: list[str] = []
    bar = 0.8 / len(impls)
    fig = _figure(9, 0.6 + 0.28 * len(cases) * max(1, len(impls)) ** 0.7 + 0.6)
    ax = fig.add_subplot()
    for j, impl in enumerate(impls):
        ys, xs = [], []
        for i, (_, benches) in enumerate(cases):
            for b in benches:
                if b["implementation"] == impl:
                    ys.append(i - 0.4 + bar * (j + 0.5))
                    xs.append(b["pct_copy_bw"])
        ax.barh(ys, xs, height=bar * 0.9, label=impl, color=_colour(impl, spare))
    ax.set_yticks(range(len(cases)), [f"{c['shape']}  {c['dtype']}  {c['pass']}" for c, _ in cases], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(100, color="#444", linewidth=0.8, linestyle="--")
    ax.set_xlabel("% of measured copy bandwidth")
    ax.set_title(f"{spec}: achieved bandwidth", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _run_label(entry: Mapping) -> str:
    try:
        return parse_time(entry["run"]["started"]).strftime("%m-%d")
    except ValueError:
        return entry["run"]["id"][:10]


def _index_formatter(labels: list[str]):
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    def label(x: float, _pos: int) -> str:
        i = int(round(x))
        return labels[i] if 0 <= i < len(labels) and abs(x - i) < 1e-6 else ""

    return MaxNLocator(nbins=8, integer=True), FuncFormatter(label)


def _pass_plot(runs: list[Mapping]) -> str:
    """Passed and failed (failed + xpassed) counts per run."""
    labels = [_run_label(e) for e in runs]
    xs = range(len(runs))
    fig = _figure(9, 2.6)
    ax = fig.add_subplot()
    ax.plot(xs, [e["summary"]["passed"] for e in runs], marker="o", color="#2e7d32", label="passed")
    ax.plot(xs, [e["summary"]["failed"] + e["summary"]["xpassed"] for e in runs], marker="o", color="#c62828",
            label="failed + xpassed")
    locator, formatter = _index_formatter(labels)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("properties")
    ax.set_title("Verification outcomes per run", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def _trend_plot(title: str, keys: list[str], runs: list[Mapping], impl_of: Mapping[str, str], prefix: str) -> str:
    """Small multiples: one line plot of median ms over runs per benchmark key."""
    labels = [_run_label(e) for e in runs]
    ncols = min(3, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    fig = _figure(10, 0.5 + 1.9 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    spare: list[str] = []
    for ax, key in zip(axes.flat, keys):
        values = [e["benchmarks"].get(key, {}).get("median_ms") for e in runs]
        ys = [v if v is not None else math.nan for v in values]
        ax.plot(range(len(runs)), ys, marker="o", markersize=3, linewidth=1.2,
                color=_colour(impl_of.get(key, ""), spare))
        short = key[len(prefix):].lstrip(".:/_-") if prefix and key.startswith(prefix) else key
        ax.set_title(short if len(short) <= 48 else short[:47] + "…", fontsize=7)
        locator, formatter = _index_formatter(labels)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(formatter)
        ax.tick_params(labelsize=6)
        ax.set_ylabel("ms", fontsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    return _png(fig)


# --- view data ----------------------------------------------------------------------------------------

def _check_order(check: str) -> tuple[int, str]:
    return (CHECKS.index(check) if check in CHECKS else len(CHECKS), check)


def _grids(results: Mapping, failure_ids: Mapping[int, str]) -> list[dict]:
    """Per spec: rows implementation x dtype, columns checks, cells the outcomes."""
    by_spec: dict[str, list[dict]] = {}
    for outcome in results["verification"]:
        by_spec.setdefault(outcome["spec"], []).append(outcome)
    grids = []
    for spec, outcomes in by_spec.items():
        checks = sorted({o["check"] for o in outcomes}, key=_check_order)
        dtypes = list(dict.fromkeys(o["dtype"] for o in outcomes))
        impls = sorted({o["implementation"] for o in outcomes}, key=implementation_order)
        cells = {(o["implementation"], o["dtype"], o["check"]): o for o in outcomes}
        rows = []
        for impl in impls:
            for dtype in dtypes:
                row = [cells.get((impl, dtype, check)) for check in checks]
                if not any(row):
                    continue
                rows.append({
                    "implementation": impl,
                    "dtype": dtype,
                    "seconds": format_seconds(sum(o["seconds"] for o in row if o)),
                    "cells": [None if o is None else {
                        "status": o["status"],
                        "label": _STATUS_LABELS[o["status"]] + (" (note)" if numerics_note(o["status"], o["worst_score"]) else ""),
                        "score": format_number(o["worst_score"]) if o["worst_score"] is not None else "",
                        "title": (o["message"].strip().splitlines() or [""])[0][:300],
                        "anchor": failure_ids.get(id(o)),
                    } for o in row],
                })
        counts = {s: sum(o["status"] == s for o in outcomes) for s in STATUSES}
        grids.append({"spec": spec, "checks": checks, "rows": rows, "counts": counts,
                      "ok": not (counts["failed"] or counts["xpassed"])})
    return grids


def _outcome_view(o: Mapping, anchor: str | None = None) -> dict:
    return {"anchor": anchor, "spec": o["spec"], "implementation": o["implementation"], "dtype": o["dtype"],
            "check": o["check"], "status": o["status"], "examples": o["examples"],
            "score": format_number(o["worst_score"]), "seconds": format_seconds(o["seconds"]),
            "message": o["message"], "repro": o["repro"]}


def _cost(results: Mapping) -> dict:
    cost = results["verification_cost"]
    total = sum(c["seconds"] for c in cost.values()) or 0.0
    outcomes: dict[str, int] = {}
    for o in results["verification"]:
        outcomes[o["spec"]] = outcomes.get(o["spec"], 0) + 1
    rows = [{"spec": spec, "outcomes": outcomes.get(spec, 0), "seconds": format_seconds(c["seconds"]),
             "share": 100.0 * c["seconds"] / total if total > 0 else 0.0,
             "compilations": "—" if c["compilations"] is None else str(c["compilations"])}
            for spec, c in sorted(cost.items(), key=lambda kv: -kv[1]["seconds"])]
    compilations = [c["compilations"] for c in cost.values() if c["compilations"] is not None]
    return {"rows": rows, "total": format_seconds(total),
            "compilations": str(sum(compilations)) if compilations else "—"}


def _speedup_class(value: float | None) -> str:
    if value is None:
        return ""
    return "faster" if value >= 1.05 else "slower" if value < 0.95 else ""


def _speedups(results: Mapping) -> list[dict]:
    cases = []
    for case, benches in benchmark_groups(results):
        rows = []
        for b in benches:
            has_flops = b["flops"] > 0
            rows.append({
                "implementation": b["implementation"],
                "reference": is_context(b),
                "median": format_number(b["median_ms"]),
                "iqr": format_number(b["iqr_ms"], 2),
                "vs_eager": format_number(b["speedup_vs_eager"], 3, "×"),
                "vs_eager_class": _speedup_class(b["speedup_vs_eager"]),
                "vs_compile": format_number(b["speedup_vs_compile"], 3, "×"),
                "vs_compile_class": _speedup_class(b["speedup_vs_compile"]),
                "vs_best": format_number(b.get("speedup_vs_best_peer"), 3, "×")
                + (f" ({b['best_peer']}" + (f", {b['vs_best_peer']}" if b.get("vs_best_peer") else "") + ")"
                   if b.get("best_peer") else ""),
                "vs_best_class": _speedup_class(b.get("speedup_vs_best_peer")),
                "gbps": format_number(b["gbps"]),
                "pct_copy": format_number(b["pct_copy_bw"], 3, "%"),
                "pct_same_size_copy": format_number(b.get("pct_same_size_copy"), 3, "%"),
                "tflops": format_number(b["tflops"]) if has_flops else "—",
                "pct_matmul": format_number(b["pct_matmul"], 3, "%") if has_flops else "—",
                "recheck": b["recheck"],
                "recheck_detail": b.get("recheck_detail", ""),
            })
        cases.append({**case, "rows": rows})
    return cases


def _verdicts(results: Mapping) -> tuple[list[dict], list[dict]]:
    """(notable verdicts, unchanged ones): regressions first, then improvements, then the rest."""
    def view(r: Mapping) -> dict:
        ci = "—" if r["ci_low"] is None and r["ci_high"] is None else \
            f"[{format_number(r['ci_low'])}, {format_number(r['ci_high'])}]"
        return {"key": r["key"], "spec": r["spec"], "implementation": r["implementation"], "verdict": r["verdict"],
                "figure": r.get("figure", "device"),
                "ratio": format_number(r["ratio"]), "ci": ci, "p": format_p(r["p_value"]),
                "baseline": format_number(r["baseline_median_ms"]), "median": format_number(r["median_ms"]),
                "reason": r["reason"]}

    ordered = sorted(results["regressions"], key=lambda r: (_VERDICT_ORDER.index(r["verdict"]), r["key"]))
    return ([view(r) for r in ordered if r["verdict"] != "unchanged"],
            [view(r) for r in ordered if r["verdict"] == "unchanged"])


def _trends(results: Mapping, history: Sequence[Mapping]) -> dict:
    """The runs of the history (plus this one if it is not in it yet) and their plots."""
    runs = list(history)
    appended = not any(e["run"]["id"] == results["run"]["id"] for e in runs)
    if appended:
        runs.append(history_entry(results))
    runs = runs[-TREND_RUNS:]
    view: dict[str, Any] = {"runs": len(runs), "appended": appended, "pass_plot": None, "plots": [], "omitted": 0}
    if len(runs) < 2:
        return view
    view["pass_plot"] = _pass_plot(runs)
    spec_of = {b["key"]: b["spec"] for b in results["benchmarks"]}
    impl_of = {b["key"]: b["implementation"] for b in results["benchmarks"]}
    keys = list(dict.fromkeys(k for e in runs for k in e["benchmarks"]))
    by_spec: dict[str, list[str]] = {}
    for key in keys:
        by_spec.setdefault(spec_of.get(key, "not in this run"), []).append(key)
    for spec, spec_keys in by_spec.items():
        shown = sorted(spec_keys, key=lambda k: (implementation_order(impl_of.get(k, "")), k))
        view["omitted"] += max(0, len(shown) - TREND_KEYS_PER_SPEC)
        shown = shown[:TREND_KEYS_PER_SPEC]
        prefix = spec if spec in spec_of.values() else ""
        view["plots"].append({"spec": spec, "png": _trend_plot(f"{spec}: median ms per run", shown, runs, impl_of,
                                                                prefix)})
    return view


def _when(text: str) -> str:
    try:
        return parse_time(text).strftime("%Y-%m-%d %H:%M:%S %Z")
    except ValueError:
        return text


def report_context(results: Mapping, history: Sequence[Mapping] | None = None) -> dict:
    """Everything the template shows, as plain data (exposed for tests and other front ends)."""
    run, summary = results["run"], summarize(results)
    bad = failures(results)
    failure_ids = {id(o): f"failure-{i}" for i, o in enumerate(bad, start=1)}
    measured = results["performance_measured"]
    notable, unchanged = _verdicts(results)
    bandwidth = []
    if measured:
        by_spec: dict[str, list] = {}
        for case, benches in benchmark_groups(results):
            by_spec.setdefault(case["spec"], []).append((case, benches))
        for spec, cases in by_spec.items():
            bandwidth.append({"spec": spec, "png": _bandwidth_plot(spec, cases)})
    roofline = results["roofline"]
    return {
        "run": run,
        "shards": run.get("shards") or [],
        "started": _when(run["started"]),
        "finished": _when(run["finished"]),
        "duration": format_seconds(duration(results)),
        "verification_time": format_seconds(sum(o["seconds"] for o in results["verification"])),
        "summary": summary,
        "red": bool(summary["failed"] or summary["xpassed"] or summary["regressions"]),
        "grids": _grids(results, failure_ids),
        "failures": [_outcome_view(o, failure_ids[id(o)]) for o in bad],
        "known_failures": [_outcome_view(o) for o in results["verification"] if o["status"] == "xfailed"],
        "cost": _cost(results),
        "performance_measured": measured,
        "not_benchmarked": results.get("not_benchmarked") or [],
        "peers_not_timed": results.get("peers_not_timed") or [],
        "first_call_warnings": warned(results.get("benchmarks") or []),
        "benchmark_errors": results.get("benchmark_errors") or [],
        "performance_note": results["performance_note"] or "no reason given",
        "incomplete": results.get("incomplete"),
        "roofline": None if roofline is None else {"copy_gbps": format_number(roofline["copy_gbps"]),
                                                   "matmul_tflops": format_number(roofline["matmul_tflops"])},
        "speedups": _speedups(results) if measured else [],
        "bandwidth_plots": bandwidth,
        "verdicts": notable,
        "unchanged": unchanged,
        "trends": _trends(results, history or []),
    }


def html_report(results: Mapping, history: Sequence[Mapping] | None = None) -> str:
    """The report page as a string."""
    validate_results(results)
    return _template().render(**report_context(results, history))


def render_html(results: Mapping, history: Sequence[Mapping] | None, path: str | os.PathLike) -> None:
    """Write the report page for ``results`` (and the trends of ``history``, oldest first) to ``path``."""
    atomic_write_text(path, html_report(results, history))
