"""Report renderers: results validation and merging, history, HTML, Markdown and JUnit."""

from __future__ import annotations

import copy
import json
import os
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

import pytest

from harness.report import (
    ReportError,
    append_history,
    history_entry,
    load_history,
    load_results,
    merge_results,
    render_html,
    render_junit,
    render_markdown,
    summarize,
    validate_results,
    write_junit,
    write_markdown,
)
from harness.report.html import html_report

FAILURE_MESSAGE = "max error 3.2 > budget 1.0 at <tensor idx=(0, 5)> & more\n  second line"


def outcome(spec, impl, dtype, check, status="passed", **extra):
    record = {"spec": spec, "implementation": impl, "dtype": dtype, "check": check, "status": status,
              "examples": 20, "worst_score": 0.25, "seconds": 1.5, "message": "", "repro": None}
    record.update(extra)
    return record


def bench(spec, impl, shape, median, pct, eager=None, compile_=None):
    return {"key": f"{spec}/{'x'.join(map(str, shape.values()))}/float16/forward/{impl}", "spec": spec,
            "shape": shape, "dtype": "float16", "scalars": {}, "pass": "forward", "implementation": impl,
            "samples_ms": [median * 0.98, median, median * 1.02], "median_ms": median, "iqr_ms": median * 0.02,
            "bytes": 8e6, "flops": 0.0, "gbps": 30.0 * pct, "pct_copy_bw": pct, "tflops": None, "pct_matmul": None,
            "speedup_vs_eager": eager, "speedup_vs_compile": compile_, "recheck": "passed"}


def verdict(key, spec, impl, kind, ratio):
    return {"key": key, "spec": spec, "implementation": impl, "verdict": kind, "ratio": ratio,
            "ci_low": ratio * 0.95, "ci_high": ratio * 1.05, "p_value": 0.0004, "baseline_median_ms": 0.1,
            "median_ms": 0.1 * ratio, "reason": f"{kind} beyond the 5% threshold"}


def make_results(run_id="nightly-42", shard=None, measured=True):
    verification = [
        outcome("softmax", "triton", "float16", "forward"),
        outcome("softmax", "triton", "float16", "backward"),
        outcome("softmax", "triton", "float32", "forward", "failed", worst_score=3.2, message=FAILURE_MESSAGE,
                repro=".harness/repro/softmax_forward_1.py"),
        outcome("softmax", "triton", "float32", "backward"),
        outcome("softmax", "cuda", "float16", "forward", "skipped", worst_score=None, examples=0,
                message="cuda extension not built"),
        outcome("rms_norm", "triton", "bfloat16", "forward"),
        outcome("rms_norm", "triton", "bfloat16", "determinism", "xfailed", message="known failure: atomics"),
    ]
    shapes = [{"rows": 4096, "cols": 1024}, {"rows": 8192, "cols": 4096}]
    benchmarks = []
    for spec in ("softmax", "rms_norm"):
        for shape in shapes:
            benchmarks += [bench(spec, "triton", shape, 0.05, 82.0, 3.1, 1.4),
                           bench(spec, "compile", shape, 0.07, 60.0, 2.2, 1.0),
                           bench(spec, "eager", shape, 0.15, 27.0, 1.0, 0.45)]
    keys = [b["key"] for b in benchmarks]
    regressions = [verdict(keys[0], "softmax", "triton", "regression", 1.25),
                   verdict(keys[6], "rms_norm", "triton", "improvement", 0.8),
                   verdict(keys[3], "softmax", "triton", "unchanged", 1.01)]
    return {
        "schema": "harness-results", "version": 1,
        "run": {"id": run_id, "started": "2024-05-01T02:00:00+00:00", "finished": "2024-05-01T02:41:07+00:00",
                "host": "gpu-runner-1", "device": "NVIDIA H100 80GB HBM3" if measured else "cpu (Triton interpreter)",
                "gpu": measured, "torch": "2.5.1", "triton": "3.6.0", "python": "3.11.9", "commit": "0123456789abcdef",
                "profile": "nightly", "shard": shard},
        "verification": verification,
        "verification_cost": {"softmax": {"seconds": 12.5, "compilations": 14}, "rms_norm": {"seconds": 4.0,
                                                                                               "compilations": None}},
        "performance_measured": measured,
        "performance_note": "" if measured else "no GPU: performance was not measured",
        "roofline": {"copy_gbps": 3000.0, "matmul_tflops": 750.0} if measured else None,
        "benchmarks": benchmarks if measured else [],
        "regressions": regressions if measured else [],
    }


def make_history(n=3):
    history = []
    for i in range(n):
        entry = history_entry(make_results(run_id=f"nightly-{39 + i}"))
        entry["run"]["started"] = (datetime(2024, 5, 1, 2, tzinfo=timezone.utc) - timedelta(days=n - 1 - i)).isoformat()
        entry["summary"]["passed"] -= i % 2
        for key in entry["benchmarks"]:
            entry["benchmarks"][key]["median_ms"] *= 1 + 0.05 * i
        history.append(entry)
    return history


# --- model --------------------------------------------------------------------------------------------

def test_summarize_counts_statuses_and_verdicts():
    assert summarize(make_results()) == {"passed": 4, "failed": 1, "skipped": 1, "xfailed": 1, "xpassed": 0,
                                         "unfinished": 0, "regressions": 1, "improvements": 1}


def test_merge_of_two_shards_keeps_the_failure_and_joins_run_info():
    a, b = make_results(shard="shard-a"), make_results(shard="shard-b")
    a["run"]["started"], b["run"]["finished"] = "2024-05-01T01:00:00+00:00", "2024-05-01T03:00:00+00:00"
    b["run"]["device"] = "NVIDIA H200"
    # The same property passes on shard a and fails on shard b: the failure must win.
    a["verification"].append(outcome("layer_norm", "triton", "float16", "forward", "passed"))
    b["verification"].append(outcome("layer_norm", "triton", "float16", "forward", "failed", message="boom"))
    merged = merge_results([a, b])
    validate_results(merged)
    kept = [o for o in merged["verification"] if o["spec"] == "layer_norm"]
    assert len(kept) == 1 and kept[0]["status"] == "failed"
    assert "boom" in kept[0]["message"] and "passed on shard-a" in kept[0]["message"]
    assert len(merged["verification"]) == len(a["verification"])  # identical keys deduplicated
    run = merged["run"]
    assert run["shards"] == ["shard-a", "shard-b"] and run["shard"] is None
    assert run["started"] == "2024-05-01T01:00:00+00:00" and run["finished"] == "2024-05-01T03:00:00+00:00"
    assert run["device"] == "NVIDIA H100 80GB HBM3, NVIDIA H200"
    assert merged["verification_cost"]["softmax"] == {"seconds": 25.0, "compilations": 28}
    assert merged["verification_cost"]["rms_norm"]["compilations"] is None
    assert len(merged["benchmarks"]) == len(a["benchmarks"])
    assert summarize(merged)["regressions"] == 1


def test_merge_of_disjoint_shards_concatenates():
    a, b = make_results(shard="a"), make_results(shard="b", measured=False)
    for o in b["verification"]:
        o["spec"] += "_b"
    merged = merge_results([a, b])
    assert len(merged["verification"]) == 2 * len(a["verification"])
    assert merged["performance_measured"] is True
    assert merged["run"]["gpu"] is True


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d.update(schema="something-else"), "schema is 'something-else'"),
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d["run"].pop("device"), "run: missing key(s) 'device'"),
    (lambda d: d["verification"][1].pop("status"), "verification[1]: missing key(s) 'status'"),
    (lambda d: d["verification"][0].update(status="exploded"), "verification[0].status is 'exploded'"),
    (lambda d: d["benchmarks"][2].update(median_ms="fast"), "benchmarks[2].median_ms"),
    (lambda d: d["run"].update(started="yesterday"), "run.started is 'yesterday', not an ISO 8601 time"),
])
def test_validation_errors_name_the_file_and_the_problem(tmp_path, mutate, expected):
    data = make_results()
    mutate(data)
    path = tmp_path / "results-shard3.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ReportError) as info:
        load_results(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_unreadable_json_names_the_file_and_position(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('{"schema": "harness-results",\n "version": 1,,}')
    with pytest.raises(ReportError, match=r"results\.json: not valid JSON \(line 2"):
        load_results(path)
    with pytest.raises(ReportError, match="cannot read"):
        load_results(tmp_path / "missing.json")


def test_valid_results_load(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(make_results()))
    assert load_results(path)["run"]["id"] == "nightly-42"


def test_append_history_keeps_old_lines_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "history.jsonl"
    for entry in make_history(3):
        append_history(path, entry)
    before = path.read_text()
    append_history(path, history_entry(make_results()))
    after = path.read_text()
    assert after.startswith(before) and after.count("\n") == 4
    assert [e["run"]["id"] for e in load_history(path)] == ["nightly-39", "nightly-40", "nightly-41", "nightly-42"]
    assert os.listdir(tmp_path) == ["history.jsonl"]


def test_append_history_refuses_a_corrupt_history_naming_the_line(tmp_path):
    path = tmp_path / "history.jsonl"
    good = [json.dumps(e) for e in make_history(3)]
    original = "\n".join([good[0], good[1], '{"run": {"id": "truncated', good[2]]) + "\n"
    path.write_text(original)
    with pytest.raises(ReportError, match=r"history\.jsonl: line 3 is not valid JSON"):
        append_history(path, history_entry(make_results()))
    assert path.read_text() == original  # nothing dropped, nothing appended
    path.write_text(good[0] + "\n" + json.dumps({"run": {"id": "x"}}) + "\n")
    with pytest.raises(ReportError, match=r"line 2 is not a history entry: missing key\(s\) 'summary'"):
        load_history(path)


def test_missing_history_is_empty(tmp_path):
    assert load_history(tmp_path / "none.jsonl") == []


# --- renderers ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def page():
    return html_report(make_results(), make_history(3))


def test_html_has_header_grid_and_escaped_failure(page):
    assert "nightly-42" in page and "NVIDIA H100 80GB HBM3" in page and "0123456789abcdef" in page
    assert '<table class="grid">' in page and '<th>determinism</th>' in page
    assert 'class="cell failed"' in page and 'class="cell xfailed"' in page
    assert "&lt;tensor idx=(0, 5)&gt; &amp; more" in page and "<tensor" not in page
    assert ".harness/repro/softmax_forward_1.py" in page
    assert '<img class="plot"' in page and 'src="data:image/png;base64,' in page
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page  # self-contained


def test_html_has_performance_tables_and_regression_row(page):
    assert '<tr class="verdict-regression">' in page and "regression beyond the 5% threshold" in page
    assert '<tr class="verdict-improvement">' in page
    assert "Unchanged benchmarks: 1" in page
    assert "3.1×" in page and "82%" in page  # speed-up vs eager, % of copy bandwidth
    assert "Performance was not measured" not in page
    assert "rms_norm: median ms per run" in page or page.count("data:image/png;base64,") >= 5


def test_html_without_gpu_shows_the_notice(tmp_path):
    path = tmp_path / "report.html"
    render_html(make_results(measured=False), [], path)
    page = path.read_text()
    assert 'id="performance-not-measured"' in page and "no GPU: performance was not measured" in page
    assert "Not enough history for trends" in page
    assert os.listdir(tmp_path) == ["report.html"]


def test_markdown_summary():
    history = make_history(3)
    text = render_markdown(make_results(), history)
    assert text.startswith("## ❌ Harness `nightly-42`: 4 passed / 1 failed / 1 regression\n")
    assert "### Failures (1)" in text and "&lt;tensor idx=(0, 5)&gt; &amp; more" in text
    assert "second line" not in text  # first line only in a table cell
    assert "🔴 regression" in text and "🟢 improvement" in text
    assert "unchanged" not in text.split("### Speed-ups")[0]
    assert "| softmax | rows=4096 cols=1024 | float16 | forward | device | triton | 0.05 | 3.1× | 1.4× | — | 82% |" in text
    assert "Since `nightly-41`" in text
    cpu = render_markdown(make_results(measured=False))
    assert "Performance was not measured:** no GPU: performance was not measured" in cpu
    assert "### Speed-ups" not in cpu


def test_junit_parses_with_the_right_counts():
    results = make_results()
    results["verification"][2]["message"] += "\x1b[31m red \x1b[0m and \x00 nul"  # must not break the XML
    root = ET.fromstring(render_junit(results))
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"softmax", "rms_norm", "performance"}
    softmax = suites["softmax"]
    assert (softmax.get("tests"), softmax.get("failures"), softmax.get("skipped")) == ("5", "1", "1")
    failing = softmax.find("testcase[@name='forward[float32]']")
    assert failing.get("classname") == "harness.softmax.triton" and failing.get("time") == "1.500"
    assert "max error 3.2" in failing.find("failure").get("message")
    assert "repro: .harness/repro/softmax_forward_1.py" in failing.find("failure").text
    assert suites["rms_norm"].find("testcase/skipped").get("type") == "xfailed"
    perf = suites["performance"]
    assert (perf.get("tests"), perf.get("failures")) == ("3", "1")
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("10", "2", "2")


def test_writers_leave_no_temporary_files(tmp_path):
    results = make_results()
    write_junit(results, tmp_path / "junit.xml")
    write_markdown(results, tmp_path / "summary.md", make_history(2))
    render_html(results, make_history(2), tmp_path / "report.html")
    append_history(tmp_path / "history.jsonl", history_entry(results))
    assert sorted(os.listdir(tmp_path)) == ["history.jsonl", "junit.xml", "report.html", "summary.md"]
    ET.parse(tmp_path / "junit.xml")
    assert load_history(tmp_path / "history.jsonl")[0]["summary"] == summarize(results)


def test_merge_does_not_mutate_its_inputs():
    a, b = make_results(shard="a"), make_results(shard="b")
    b["verification"][0]["status"] = "failed"
    snapshot = copy.deepcopy((a, b))
    merge_results([a, b])
    assert (a, b) == snapshot


def test_benchmarks_left_out_by_a_budget_are_reported_everywhere(tmp_path):
    first, second = make_results(shard="a"), make_results(run_id="nightly-43", shard="b")
    for results, label in ((first, "softmax {'rows': 8192, 'cols': 4096} bfloat16"), (second, "layer_norm {'rows': 1} float16")):
        results["not_benchmarked"] = [label]
        results["performance_note"] = "quick benchmark subset; the benchmark time budget of 60 s ran out before 1 shape(s) started"
    page = html_report(first, [])
    assert 'id="benchmarks-partial"' in page and "softmax {&#39;rows&#39;: 8192" in page
    text = render_markdown(first)
    assert "Benchmarks are partial:** quick benchmark subset; the benchmark time budget" in text
    assert "Not measured: softmax {'rows': 8192, 'cols': 4096} bfloat16" in text
    merged = merge_results([first, second])
    assert merged["not_benchmarked"] == ["softmax {'rows': 8192, 'cols': 4096} bfloat16", "layer_norm {'rows': 1} float16"]
    bad = copy.deepcopy(first)
    bad["not_benchmarked"] = "softmax"
    with pytest.raises(ReportError, match="not_benchmarked"):
        validate_results(bad, "r.json")
    assert 'id="benchmarks-partial"' not in html_report(make_results(), [])


def test_checks_a_budget_stopped_make_the_run_incomplete_not_green():
    results = make_results(measured=False)
    results["verification"] = [o for o in results["verification"] if o["status"] == "passed"]
    assert render_markdown(results).startswith("## ✅")
    stopped = copy.deepcopy(results["verification"][0])
    stopped.update(status="skipped", message="not run: the verification time budget of 60 s ran out before this check finished")
    results["verification"].append(stopped)
    assert summarize(results)["unfinished"] == 1
    text = render_markdown(results)
    assert text.startswith("## ⚠️") and "/ 1 not run" in text.splitlines()[0]
    assert 'id="verification-incomplete"' in html_report(results, [])
    results["incomplete"] = "interrupted during verification (SIGTERM or Ctrl-C)"
    text = render_markdown(results)
    assert "(INCOMPLETE)" in text.splitlines()[0] and "**This run is incomplete:** interrupted during" in text
    assert 'id="run-incomplete"' in html_report(results, [])


def test_both_figures_show_in_every_report_with_the_best_peer():
    results = make_results()
    shape = {"rows": 4096, "cols": 1024}
    wall = [dict(bench("softmax", impl, shape, ms, 50.0), figure="wall", timing="wall/back-to-back/no-flush",
                 key=f"softmax/forward/x/float16/wall/{impl}", best_peer="eager", speedup_vs_best_peer=0.012 / ms,
                 vs_best_peer="slower" if impl == "triton" else "tie", speedup_vs_best_peer_ci=[0.4, 0.6])
            for impl, ms in (("triton", 0.024), ("eager", 0.012), ("compile", 0.031))]
    results["benchmarks"] += wall
    results = validate_results(results)
    text = render_markdown(results)
    assert "| softmax | rows=4096 cols=1024 | float16 | forward | wall | triton | 0.024 |" in text
    assert "| 0.5× (eager, slower) |" in text
    page = html_report(results)
    assert "<td rowspan=\"3\">wall</td>" in page and "0.5× (eager, slower)" in page
    with pytest.raises(ReportError, match="figure"):
        validate_results({**results, "benchmarks": [dict(wall[0], figure="host")]})
    with pytest.raises(ReportError, match="speedup_vs_best_peer_ci"):
        validate_results({**results, "benchmarks": [dict(wall[0], speedup_vs_best_peer_ci=[0.4])]})


def test_a_merged_run_is_incomplete_where_a_shard_is():
    first, second = make_results(run_id="a", shard="gpu0"), make_results(run_id="b", shard="gpu1")
    second["incomplete"] = "interrupted during the benchmarks (SIGTERM or Ctrl-C)"
    second["peers_not_timed"] = ["softmax peer liger: No module named 'liger_kernel'; install it with: pip install liger-kernel"]
    merged = merge_results([first, second])
    assert merged["incomplete"] == "gpu1: interrupted during the benchmarks (SIGTERM or Ctrl-C)"
    text = render_markdown(merged)
    assert "(INCOMPLETE)" in text.splitlines()[0] and "Peers not timed here:** softmax peer liger" in text
    assert merge_results([first, make_results(run_id="c", shard="gpu2")])["incomplete"] is None


def test_a_pass_beyond_eagers_own_error_carries_a_numerics_note_in_every_report():
    results = make_results()
    results["verification"].append(outcome("softmax", "triton", "bfloat16", "backward", worst_score=1.73))
    text = render_markdown(results)
    assert "### Numerics notes (1)" in text and "| softmax | triton | bfloat16 | backward | 1.73 |" in text
    assert "pass (note)" in html_report(results)
    quiet = make_results()  # every passing score <= 1: no note anywhere
    assert "Numerics notes" not in render_markdown(quiet) and "(note)" not in html_report(quiet)
