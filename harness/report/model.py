"""The results and history files the reports read: loading, validation, merging, history.

A nightly run writes one RESULTS file (``"schema": "harness-results"``, version 1) per run or per
shard, and appends one line per run to a HISTORY file (JSON Lines). The renderers trust what this
module hands them, so everything is validated here, once, with errors that name the file and the
offending key: a malformed file fails the report step with a useful message instead of a
``KeyError`` deep inside a template.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.bench.record import schema as benchmark_schema
from harness.io import atomic_write_text
from harness.regression import RECORDED_VERDICTS
from harness.results import FAILING, STATUSES, UNFINISHED_PREFIX, numerics_note
from harness.spec import FIGURES, REFERENCE_IMPLEMENTATIONS

SCHEMA = "harness-results"
VERSION = 1

SUMMARY_KEYS = STATUSES + ("regressions", "improvements")
HISTORY_BENCH_KEYS = ("median_ms", "pct_copy_bw", "speedup_vs_eager", "speedup_vs_compile")


class ReportError(ValueError):
    """A results or history file is unreadable or malformed; the message names the file and the problem."""


# --- schema -------------------------------------------------------------------------------------------

_NUM = "number"  # int or float, not bool
_OPT_NUM = "number|null"
_OPT_STR = "string|null"
_OPT_INT = "integer|null"

_RUN = {"id": str, "started": "time", "finished": "time", "host": str, "device": str, "gpu": bool,
        "torch": str, "triton": str, "python": str, "commit": _OPT_STR, "profile": str, "shard": _OPT_STR}
_OUTCOME = {"spec": str, "implementation": str, "dtype": str, "check": str, "status": STATUSES, "examples": int,
            "worst_score": _OPT_NUM, "seconds": _NUM, "message": str, "repro": _OPT_STR}
# the benchmark records' fields, and those a file written within version 1 may lack: declared once,
# with the record (harness.bench.record)
_BENCHMARK, _BENCHMARK_OPTIONAL = benchmark_schema()
_REGRESSION = {"key": str, "spec": str, "implementation": str, "verdict": RECORDED_VERDICTS, "ratio": _OPT_NUM,
               "ci_low": _OPT_NUM, "ci_high": _OPT_NUM, "p_value": _OPT_NUM, "baseline_median_ms": _OPT_NUM,
               "median_ms": _OPT_NUM, "reason": str}
# Added within version 1: what a verdict's samples were divided by (harness.regression): the
# machine's drift, or for a wall line whose references moved apart the end of their span it was
# judged beyond (None: judged as measured)
_REGRESSION_OPTIONAL = {"drift": _OPT_NUM, "figure": FIGURES}
_TOP = {"schema": str, "version": int, "run": dict, "verification": list, "verification_cost": dict,
        "performance_measured": bool, "performance_note": str, "roofline": "object|null", "benchmarks": list,
        "regressions": list}
# benchmark shapes a --bench-budget left out, and shapes whose benchmark raised ("label: error")
_TOP_OPTIONAL = {"not_benchmarked": list, "benchmark_errors": list,
                 # spec peers whose library is not installed here, with how to install it
                 "peers_not_timed": list,
                 # why the run did not finish (a time budget, an interrupt), or null: finished
                 "incomplete": _OPT_STR}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_problem(value: Any, expected: Any) -> str | None:
    """Why ``value`` does not fit ``expected`` (a type, a tuple of allowed values or a tag), or None."""
    if isinstance(expected, tuple):
        return None if value in expected else f"is {value!r}, expected one of {', '.join(map(repr, expected))}"
    if expected == _NUM:
        return None if _is_number(value) else f"is {value!r}, expected a number"
    if expected == _OPT_NUM:
        return None if value is None or _is_number(value) else f"is {value!r}, expected a number or null"
    if expected == _OPT_INT:
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        return None if ok else f"is {value!r}, expected an integer or null"
    if expected == _OPT_STR:
        return None if value is None or isinstance(value, str) else f"is {value!r}, expected a string or null"
    if expected == "interval|null":  # [low, high], each a number or null
        ok = value is None or (isinstance(value, list) and len(value) == 2
                               and all(v is None or _is_number(v) for v in value))
        return None if ok else f"is {value!r:.60}, expected [low, high] or null"
    if expected == "object|null":
        return None if value is None or isinstance(value, dict) else f"is {value!r}, expected an object or null"
    if expected == "time":
        if not isinstance(value, str):
            return f"is {value!r}, expected an ISO 8601 time string"
        try:
            parse_time(value)
        except ValueError:
            return f"is {value!r}, not an ISO 8601 time"
        return None
    if expected is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else f"is {value!r}, expected an integer"
    names = {str: "a string", bool: "true or false", dict: "an object", list: "a list"}
    return None if isinstance(value, expected) else f"is {value!r:.60}, expected {names[expected]}"


def _check_record(record: Any, fields: Mapping[str, Any], where: str, problems: list[str],
                  optional: Mapping[str, Any] = {}) -> None:  # noqa: B006 - read only
    if not isinstance(record, dict):
        problems.append(f"{where} is {record!r:.60}, expected an object")
        return
    missing = [k for k in fields if k not in record]
    if missing:
        problems.append(f"{where}: missing key(s) {', '.join(map(repr, missing))}")
    for key, expected in {**fields, **optional}.items():
        if key in record:
            problem = _type_problem(record[key], expected)
            if problem:
                problems.append(f"{where}.{key} {problem}")


def validate_results(data: Any, source: str = "<results>") -> dict:
    """Check ``data`` against the results schema (version 1); return it or raise ``ReportError``.

    ``source`` (usually the file name) starts every message. All problems are reported at once (the
    first ten), so a nightly job author fixes a producer in one round trip.
    """
    if not isinstance(data, dict):
        raise ReportError(f"{source}: expected a JSON object at the top level, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ReportError(f"{source}: schema is {data.get('schema')!r}, expected {SCHEMA!r} "
                          "(is this a harness results file?)")
    if data.get("version") != VERSION:
        raise ReportError(f"{source}: results version {data.get('version')!r} is not supported "
                          f"(this harness reads version {VERSION})")
    problems: list[str] = []
    _check_record(data, _TOP, "results", problems, _TOP_OPTIONAL)
    if isinstance(data.get("run"), dict):
        _check_record(data["run"], _RUN, "run", problems)
    for name, fields in (("verification", _OUTCOME), ("benchmarks", _BENCHMARK), ("regressions", _REGRESSION)):
        if isinstance(data.get(name), list):
            for i, record in enumerate(data[name]):
                _check_record(record, fields, f"{name}[{i}]", problems,
                              {"benchmarks": _BENCHMARK_OPTIONAL, "regressions": _REGRESSION_OPTIONAL}.get(name, {}))
    if isinstance(data.get("verification_cost"), dict):
        for spec, cost in data["verification_cost"].items():
            _check_record(cost, {"seconds": _NUM, "compilations": _OPT_INT}, f"verification_cost[{spec!r}]", problems)
    if isinstance(data.get("roofline"), dict):
        _check_record(data["roofline"], {"copy_gbps": _NUM, "matmul_tflops": _NUM}, "roofline", problems)
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ReportError(f"{source}: malformed results: " + "; ".join(problems[:10]) + more)
    return data


def load_results(path: str | os.PathLike) -> dict:
    """Read and validate one results file; ``ReportError`` names the file for any problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read results file: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    return validate_results(data, source=str(path))


def parse_time(text: str) -> datetime:
    """An ISO 8601 time as an aware datetime (a time without a zone is taken as UTC)."""
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


# --- merging shards -----------------------------------------------------------------------------------

# Which of two outcomes for the same (spec, implementation, dtype, check) a merge keeps: the worst.
_STATUS_RANK = {"failed": 4, "xpassed": 3, "xfailed": 2, "passed": 1, "skipped": 0}
_VERDICT_RANK = {"regression": 2, "baseline-unreadable": 1}


def _unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(v for v in values if v not in (None, "")))


def merge_results(shards: list[Mapping]) -> dict:
    """Merge the results of the shards (or runners) of one run into one results dict.

    * ``verification``: concatenated in shard order. When two shards report the same
      (spec, implementation, dtype, check), ONE outcome is kept, the worst by
      failed > xpassed > xfailed > passed > skipped: a failure wins over a pass, and a run never
      looks greener merged than one of its shards. When the statuses differ, the kept outcome's
      message says what the other shards found, so the disagreement stays visible.
    * ``benchmarks``: concatenated; for a key measured by two shards the first is kept, unless a
      later one failed its recheck (a failed recheck wins, like a failure).
    * ``regressions``: concatenated; for a duplicate key a ``regression`` wins, then
      ``baseline-unreadable``, else the first.
    * ``verification_cost``: seconds and compilations summed per spec (compilations stay null only
      if every shard reported null).
    * ``run``: ``shards`` lists each input's shard name (or run id), ``started`` is the earliest
      start, ``finished`` the latest finish; device, host, versions, commit and profile are the
      distinct values joined with ", "; ``gpu`` is true if any shard had one; ``shard`` is null.
    * performance: measured if any shard measured it; notes joined; the first roofline is kept
      (percentages in the benchmarks were already computed per shard against its own roofline).

    Every input is validated first; an error names the shard by its position and name.
    """
    if not shards:
        raise ReportError("merge_results: no results to merge")
    for i, shard in enumerate(shards):
        run = shard.get("run") if isinstance(shard, dict) else None
        name = run.get("shard") if isinstance(run, dict) else None
        validate_results(shard, source=f"shard {i}" + (f" ({name})" if name else ""))
    runs = [s["run"] for s in shards]

    outcomes: dict[tuple, dict] = {}
    seen: dict[tuple, list[tuple[str, str]]] = {}
    for shard in shards:
        label = shard["run"]["shard"] or shard["run"]["id"]
        for outcome in shard["verification"]:
            key = (outcome["spec"], outcome["implementation"], outcome["dtype"], outcome["check"])
            seen.setdefault(key, []).append((outcome["status"], label))
            kept = outcomes.get(key)
            if kept is None or _STATUS_RANK[outcome["status"]] > _STATUS_RANK[kept["status"]]:
                outcomes[key] = dict(outcome)
    for key, reports in seen.items():
        statuses = {status for status, _ in reports}
        if len(statuses) > 1:
            kept = outcomes[key]
            others = ", ".join(f"{status} on {label}" for status, label in reports if status != kept["status"])
            note = f"[merge] shards disagree: kept {kept['status']}; also {others}"
            kept["message"] = f"{kept['message']}\n{note}" if kept["message"] else note

    benchmarks: dict[str, dict] = {}
    for shard in shards:
        for bench in shard["benchmarks"]:
            kept = benchmarks.get(bench["key"])
            if kept is None or (bench["recheck"] == "failed" and kept["recheck"] != "failed"):
                benchmarks[bench["key"]] = dict(bench)

    regressions: dict[str, dict] = {}
    for shard in shards:
        for reg in shard["regressions"]:
            kept = regressions.get(reg["key"])
            if kept is None or _VERDICT_RANK.get(reg["verdict"], 0) > _VERDICT_RANK.get(kept["verdict"], 0):
                regressions[reg["key"]] = dict(reg)

    cost: dict[str, dict] = {}
    for shard in shards:
        for spec, entry in shard["verification_cost"].items():
            total = cost.setdefault(spec, {"seconds": 0.0, "compilations": None})
            total["seconds"] += entry["seconds"]
            if entry["compilations"] is not None:
                total["compilations"] = (total["compilations"] or 0) + entry["compilations"]

    starts = [(parse_time(r["started"]), r["started"]) for r in runs]
    ends = [(parse_time(r["finished"]), r["finished"]) for r in runs]
    ids = _unique(r["id"] for r in runs)
    run = {
        "id": ids[0] if len(ids) == 1 else "+".join(ids),
        "started": min(starts)[1],
        "finished": max(ends)[1],
        "gpu": any(r["gpu"] for r in runs),
        "shard": None,
        "shards": [name for r in runs for name in (r.get("shards") or [r["shard"] or r["id"]])],
    }
    for key in ("host", "device", "torch", "triton", "python", "profile"):
        run[key] = ", ".join(_unique(r[key] for r in runs))
    commits = _unique(r["commit"] for r in runs)
    run["commit"] = ", ".join(commits) if commits else None

    measured = any(s["performance_measured"] for s in shards)
    notes = _unique(s["performance_note"] for s in shards)
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "run": run,
        "verification": list(outcomes.values()),
        "verification_cost": cost,
        "performance_measured": measured,
        "performance_note": "; ".join(notes),
        "roofline": next((s["roofline"] for s in shards if s["roofline"] is not None), None),
        "benchmarks": list(benchmarks.values()),
        "regressions": list(regressions.values()),
        "not_benchmarked": [label for s in shards for label in s.get("not_benchmarked") or []],
        "benchmark_errors": [error for s in shards for error in s.get("benchmark_errors") or []],
        "peers_not_timed": list(dict.fromkeys(p for s in shards for p in s.get("peers_not_timed") or [])),
        # a merged run is incomplete where any shard is
        "incomplete": "; ".join(f"{s['run'].get('shard') or s['run']['id']}: {s['incomplete']}"
                                for s in shards if s.get("incomplete")) or None,
    }


# --- summaries and history ----------------------------------------------------------------------------

def summarize(results: Mapping) -> dict:
    """Counts per verification status, plus the numbers of regressions and improvements, and of
    checks a time budget stopped (``unfinished``, among the skipped)."""
    summary = {status: 0 for status in STATUSES}
    for outcome in results["verification"]:
        summary[outcome["status"]] += 1
    summary["unfinished"] = sum(o["status"] == "skipped" and o["message"].startswith(UNFINISHED_PREFIX)
                                for o in results["verification"])
    summary["regressions"] = sum(r["verdict"] == "regression" for r in results["regressions"])
    summary["improvements"] = sum(r["verdict"] == "improvement" for r in results["regressions"])
    return summary


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None: JSON has no NaN, and strict readers reject it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def history_entry(results: Mapping) -> dict:
    """The one-line record of a run kept in the history: run info, summary, per-benchmark medians."""
    return {
        "run": dict(results["run"]),
        "summary": summarize(results),
        "benchmarks": {
            b["key"]: {k: _json_safe(b[k]) for k in HISTORY_BENCH_KEYS} for b in results["benchmarks"]
        },
    }


def _history_problem(entry: Any) -> str | None:
    """Why ``entry`` is not a usable history record, or None."""
    if not isinstance(entry, dict):
        return f"expected a JSON object, got {type(entry).__name__}"
    missing = [k for k in ("run", "summary", "benchmarks") if k not in entry]
    if missing:
        return f"missing key(s) {', '.join(map(repr, missing))}"
    run, summary, benchmarks = entry["run"], entry["summary"], entry["benchmarks"]
    if not isinstance(run, dict) or not isinstance(run.get("id"), str) or not isinstance(run.get("started"), str):
        return "'run' must be an object with string 'id' and 'started'"
    if not isinstance(summary, dict):
        return "'summary' must be an object"
    for key in SUMMARY_KEYS:
        if _type_problem(summary.get(key), int):
            return f"summary.{key} {_type_problem(summary.get(key), int)}"
    if not isinstance(benchmarks, dict):
        return "'benchmarks' must be an object"
    for key, bench in benchmarks.items():
        if not isinstance(bench, dict) or _type_problem(bench.get("median_ms"), _OPT_NUM):
            return f"benchmarks[{key!r}] must be an object with a numeric 'median_ms'"
    return None


def _read_history(path: Path) -> tuple[str, list[dict]]:
    """The file's text and its parsed entries; raises naming the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", []
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read history file: {exc}") from exc
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}: line {number} is not valid JSON ({exc.msg}, column {exc.colno}); "
                              "fix or remove that line by hand, the history is never rewritten without it") from exc
        problem = _history_problem(entry)
        if problem:
            raise ReportError(f"{path}: line {number} is not a history entry: {problem}")
        entries.append(entry)
    return text, entries


def load_history(path: str | os.PathLike) -> list[dict]:
    """The entries of a history file, oldest first; an absent file is an empty history."""
    return _read_history(Path(path))[1]


def append_history(path: str | os.PathLike, entry: Mapping) -> None:
    """Append one run's entry to the history file, atomically.

    The existing file is read and every line validated first: a corrupt line raises
    ``ReportError`` naming its line number rather than being silently dropped or buried under new
    lines. The whole file (old text byte for byte, plus the new line) is then written with
    ``atomic_write_text``, so a crash mid-write leaves the old history intact. Appenders must be
    serialized (one nightly job per history file): two concurrent appends can lose one of them.
    """
    target = Path(path)
    problem = _history_problem(entry)
    if problem:
        raise ReportError(f"{target}: refusing to append a malformed history entry: {problem}")
    text, _ = _read_history(target)
    if text and not text.endswith("\n"):
        text += "\n"
    line = json.dumps(_json_safe(entry), separators=(",", ":"), allow_nan=False)
    atomic_write_text(target, text + line + "\n")


# --- helpers shared by the renderers ------------------------------------------------------------------



def notes(results: Mapping) -> list[dict]:
    """The outcomes that passed with a numerics note (``harness.results.numerics_note``), worst first."""
    noted = [o for o in results["verification"] if numerics_note(o["status"], o["worst_score"])]
    return sorted(noted, key=lambda o: -o["worst_score"])


def failures(results: Mapping) -> list[dict]:
    """The outcomes that make the run red (failed, xpassed), in report order."""
    return [o for o in results["verification"] if o["status"] in FAILING]


def implementation_order(name: str) -> tuple[int, str]:
    """Sort key: fused implementations first (alphabetically), then torch.compile, then eager."""
    return (REFERENCE_IMPLEMENTATIONS.index(name) + 1 if name in REFERENCE_IMPLEMENTATIONS else 0, name)


def shape_label(bench: Mapping) -> str:
    """``rows=4096 cols=1024`` plus any scalars (``eps=1e-05``): how a benchmark's case is named."""
    parts = [f"{dim}={size}" for dim, size in bench["shape"].items()]
    parts += [f"{name}={value}" for name, value in bench["scalars"].items()]
    return " ".join(parts) or "(scalar)"


def benchmark_groups(results: Mapping) -> list[tuple[dict, list[dict]]]:
    """Benchmarks grouped by case (spec, shape and scalars, dtype, pass, figure), one row per implementation.

    Groups keep the order in which the results list them; rows are sorted fused first, then the
    references (see ``implementation_order``).
    """
    groups: dict[tuple, list[dict]] = {}
    for bench in results["benchmarks"]:
        key = (bench["spec"], shape_label(bench), bench["dtype"], bench["pass"], bench.get("figure", "device"))
        groups.setdefault(key, []).append(bench)
    return [
        ({"spec": k[0], "shape": k[1], "dtype": k[2], "pass": k[3], "figure": k[4]},
         sorted(rows, key=lambda b: implementation_order(b["implementation"])))
        for k, rows in groups.items()
    ]


def duration(results: Mapping) -> float:
    """Wall-clock seconds of the run, from its start to its finish."""
    run = results["run"]
    return max(0.0, (parse_time(run["finished"]) - parse_time(run["started"])).total_seconds())


def format_seconds(seconds: float) -> str:
    """``1h 02m 03s`` / ``4m 05s`` / ``6.2s``: durations as people read them."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def format_number(value: float | None, digits: int = 3, suffix: str = "") -> str:
    """A number with ``digits`` significant digits, or an em dash for a missing one."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}{suffix}"  # 2,850 rather than 2.85e+03
    return f"{value:.{digits}g}{suffix}"


def format_p(value: float | None) -> str:
    if value is None:
        return "—"
    return "<0.001" if value < 0.001 else f"{value:.3f}"
