"""JUnit XML for CI systems that show test results natively (GitLab, Jenkins, GitHub test reporters).

One ``<testsuite>`` per spec, one ``<testcase>`` per verification outcome
(classname ``harness.<spec>.<implementation>``, name ``<check>[<dtype>]``): failed and xpassed are
``<failure>``, skipped and xfailed are ``<skipped>``. Performance verdicts go in a ``performance``
suite, one testcase per benchmark key: a regression is a ``<failure>``; no-baseline,
insufficient-data and baseline-unreadable are ``<skipped>`` (nothing could be compared);
improvements and unchanged pass.

Failure messages carry kernel output, which may hold ANSI colour codes or other control characters
that XML 1.0 forbids; they are stripped, so the file always parses.
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from harness.io import atomic_write_text
from harness.report.model import format_number, format_p, validate_results

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SKIPPED_VERDICTS = ("no-baseline", "insufficient-data", "baseline-unreadable")


def _xml_text(text: str) -> str:
    """``text`` without ANSI escapes and without the characters XML 1.0 cannot hold."""
    return _NOT_XML.sub("\ufffd", _ANSI.sub("", text))


def _summary_line(text: str, limit: int = 200) -> str:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _time(seconds: float) -> str:
    return f"{seconds:.3f}" if math.isfinite(seconds) and seconds >= 0 else "0.000"


def _suite(parent: ET.Element, name: str) -> ET.Element:
    return ET.SubElement(parent, "testsuite", name=name)


def _finish(suite: ET.Element, counts: dict[str, int | float]) -> None:
    suite.set("tests", str(counts["tests"]))
    suite.set("failures", str(counts["failures"]))
    suite.set("errors", "0")
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", _time(counts["time"]))


def render_junit(results: Mapping) -> str:
    """The JUnit XML document (a ``<testsuites>`` root) for ``results``."""
    validate_results(results)
    root = ET.Element("testsuites", name=f"harness {results['run']['id']}")
    total = {"tests": 0, "failures": 0, "skipped": 0, "time": 0.0}
    by_spec: dict[str, list[dict]] = {}
    for outcome in results["verification"]:
        by_spec.setdefault(outcome["spec"], []).append(outcome)
    for spec, outcomes in by_spec.items():
        suite = _suite(root, spec)
        counts = {"tests": 0, "failures": 0, "skipped": 0, "time": 0.0}
        for o in outcomes:
            case = ET.SubElement(suite, "testcase", classname=f"harness.{spec}.{o['implementation']}",
                                 name=f"{o['check']}[{o['dtype']}]", time=_time(o["seconds"]))
            message = _xml_text(o["message"])
            counts["tests"] += 1
            counts["time"] += o["seconds"] if math.isfinite(o["seconds"]) else 0.0
            if o["status"] in ("failed", "xpassed"):
                counts["failures"] += 1
                failure = ET.SubElement(case, "failure", message=_summary_line(message) or o["status"],
                                        type=o["status"])
                details = [message]
                if o["worst_score"] is not None:
                    details.append(f"worst score: {format_number(o['worst_score'])}")
                if o["repro"]:
                    details.append(f"repro: {_xml_text(o['repro'])}")
                failure.text = "\n".join(d for d in details if d)
            elif o["status"] in ("skipped", "xfailed"):
                counts["skipped"] += 1
                skipped = ET.SubElement(case, "skipped", message=_summary_line(message) or o["status"],
                                        type=o["status"])
                if "\n" in message.strip():
                    skipped.text = message
        _finish(suite, counts)
        for key in total:
            total[key] += counts[key]

    errors = results.get("benchmark_errors") or []
    if results["regressions"] or errors:
        suite = _suite(root, "performance")
        counts = {"tests": 0, "failures": 0, "skipped": 0, "time": 0.0}
        for error in errors:  # a shape whose benchmark raised: a failure, named by its label
            label, _, detail = error.partition(": ")
            case = ET.SubElement(suite, "testcase", classname="harness.performance.errors", name=label, time="0.000")
            counts["tests"] += 1
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=_summary_line(_xml_text(detail)) or "raised",
                          type="error").text = _xml_text(error)
        for r in results["regressions"]:
            case = ET.SubElement(suite, "testcase", classname=f"harness.performance.{r['spec']}",
                                 name=f"{r['key']}[{r['implementation']}]", time="0.000")
            counts["tests"] += 1
            detail = (f"{r['verdict']}: ratio {format_number(r['ratio'])} "
                      f"(95% CI [{format_number(r['ci_low'])}, {format_number(r['ci_high'])}], "
                      f"p {format_p(r['p_value'])}); median {format_number(r['median_ms'])} ms vs baseline "
                      f"{format_number(r['baseline_median_ms'])} ms; {_xml_text(r['reason'])}")
            if r["verdict"] == "regression":
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=_summary_line(detail), type="regression").text = detail
            elif r["verdict"] in _SKIPPED_VERDICTS:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=_summary_line(detail), type=r["verdict"])
        _finish(suite, counts)
        for key in total:
            total[key] += counts[key]

    _finish(root, total)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(results: Mapping, path: str | os.PathLike) -> None:
    """Write ``render_junit`` to ``path``, atomically."""
    atomic_write_text(path, render_junit(results))
