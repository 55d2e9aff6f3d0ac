"""The pytest plugin's generation and filters, and the CLI end to end (list, check, new, repro)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]


def _run(args, cwd=ROOT, env=None, timeout=600):
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": str(cwd)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def test_plugin_generates_one_test_per_spec_implementation_dtype_check():
    out = _run(["-m", "pytest", "harness/kernel_tests.py", "--collect-only", "-q", "-p", "no:xdist"]).stdout
    ids = [line for line in out.splitlines() if "test_kernel[" in line]
    assert any("softmax-triton-float16-forward" in i for i in ids)
    assert any("softmax-triton-float32-gradcheck" in i for i in ids)
    assert any("add_mul_act-triton-bfloat16-backward" in i for i in ids)
    assert not any("add_mul_act-triton-float16-contract" in i for i in ids), "contract runs once per implementation"


def test_kernels_and_dtype_filters():
    out = _run(["-m", "pytest", "harness/kernel_tests.py", "--collect-only", "-q", "-p", "no:xdist",
                "--kernels", "softmax", "--dtypes", "float16"]).stdout
    ids = [line for line in out.splitlines() if "test_kernel[" in line]
    assert ids and all("softmax-triton-float16" in i for i in ids)
    bad = _run(["-m", "pytest", "harness/kernel_tests.py", "--collect-only", "-q", "-p", "no:xdist", "--kernels", "nope"])
    assert bad.returncode != 0 and "unknown kernel" in bad.stdout + bad.stderr


def test_kernels_alone_runs_only_that_kernel_and_a_plain_run_adds_every_kernel_to_the_project_tests():
    focused = _run(["-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "--kernels", "softmax"]).stdout
    ids = [line for line in focused.splitlines() if "::" in line]
    assert ids and all(i.startswith("harness/kernel_tests.py::test_kernel[softmax-") for i in ids), focused[-2000:]
    everything = _run(["-m", "pytest", "--collect-only", "-q", "-p", "no:xdist"]).stdout
    ids = [line for line in everything.splitlines() if "::" in line]
    assert any(i.startswith("tests/unit/") for i in ids) and any("test_kernel[add_mul_act-" in i for i in ids)
    assert len([i for i in ids if "test_kernel[" in i]) == len(set(i for i in ids if "test_kernel[" in i))
    named = _run(["-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "tests/unit/test_launch.py"]).stdout
    assert "test_kernel[" not in named  # a path on the command line: nothing added


def test_cli_list_and_check_print_tables():
    listed = _run(["-m", "harness", "list"])
    assert listed.returncode == 0 and "softmax" in listed.stdout and "add_mul_act" in listed.stdout
    checked = _run(["-m", "harness", "check", "softmax", "--checks", "contract,unwritten", "--dtypes", "float16"])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "unwritten" in checked.stdout and "pass" in checked.stdout and "0 failed" in checked.stdout


def test_cli_rejects_unknown_kernel_with_the_known_ones():
    result = _run(["-m", "harness", "check", "softmaxx"])
    assert result.returncode == 2 and "known: " in result.stdout


def test_cli_repro_replays_case_json_longer_than_a_file_name():
    """Failure reports print ``harness repro '<case JSON>'``; JSON past 255 characters once made
    the CLI ask the file system about it and die with OSError (file name too long)."""
    case = ('{"dims": {"*batch": [], "rows": 2, "cols": 9}, "dtype": "float32", "grad_layout": "contiguous", '
            '"grad_seed": 0, "scalars": {}, "schema": 1, "spec": "softmax", "tensors": {"x": {"dtype": "float32", '
            '"layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2, 9], '
            '"values": "normal"}}}')
    assert len(case) > 255
    replayed = _run(["-m", "harness", "repro", case, "--check", "forward"])
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "passed" in replayed.stdout.lower()
    neither = _run(["-m", "harness", "repro", "no_such_script.py"])
    assert neither.returncode == 2 and "neither a repro script nor case JSON" in neither.stdout


def test_harness_new_scaffolds_a_kernel_that_passes(tmp_path):
    for package in ("harness", "kernels", "references", "specs"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    created = _run(["-m", "harness", "new", "scaled_copy", "--root", "."], cwd=tmp_path)
    assert created.returncode == 0, created.stdout + created.stderr
    for rel in ("kernels/scaled_copy.py", "references/scaled_copy.py", "specs/scaled_copy.py", "docs/kernels/scaled_copy.md"):
        assert (tmp_path / rel).is_file()
    again = _run(["-m", "harness", "new", "scaled_copy", "--root", "."], cwd=tmp_path)
    assert again.returncode == 2 and "refusing to overwrite" in again.stdout
    checked = _run(["-m", "harness", "check", "scaled_copy"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 failed" in checked.stdout


@pytest.mark.parametrize("name", ["Bad", "_hidden", "class", "two words"])
def test_harness_new_rejects_bad_names(tmp_path, name):
    from harness.scaffold import ScaffoldError, scaffold

    with pytest.raises(ScaffoldError, match="NAME must be"):
        scaffold(name, tmp_path)


RECORDED = ROOT / "benchmarks" / "results" / "2026-11-22-h100" / "results.json"


def test_report_rerenders_a_stored_gpu_run(tmp_path):
    result = _run(["-m", "harness", "report", str(RECORDED), "--out", str(tmp_path)])
    assert result.returncode == 0, result.stdout + result.stderr
    html = (tmp_path / "report.html").read_text()
    assert "NVIDIA H100" in html and "data:image/png;base64," in html
    assert "passed" in (tmp_path / "summary.md").read_text()


def test_record_baseline_from_results_and_refuse_a_corrupt_file(tmp_path):
    recorded = _run(["-m", "harness", "record-baseline", str(RECORDED), "--baselines", str(tmp_path)])
    assert recorded.returncode == 0 and "recorded 12 baseline(s)" in recorded.stdout
    (path,) = tmp_path.glob("*.json")
    # that run predates named timing methods, so its records name none; a run that names one keeps it
    assert all("timing" not in r for r in json.loads(path.read_text())["records"].values())
    named = json.loads(RECORDED.read_text())
    for b in named["benchmarks"]:
        b["timing"] = "method-x"
    (tmp_path / "named.json").write_text(json.dumps(named))
    assert _run(["-m", "harness", "record-baseline", str(tmp_path / "named.json"), "--baselines", str(tmp_path)]).returncode == 0
    assert {r["timing"] for r in json.loads(path.read_text())["records"].values()} == {"method-x"}
    named["benchmarks"][0]["timing"] = " "
    (tmp_path / "blank.json").write_text(json.dumps(named))
    blank = _run(["-m", "harness", "record-baseline", str(tmp_path / "blank.json"), "--baselines", str(tmp_path)])
    assert blank.returncode == 2 and "timing" in blank.stdout and "Traceback" not in blank.stdout + blank.stderr
    path.write_text("{ not json")
    refused = _run(["-m", "harness", "record-baseline", str(RECORDED), "--baselines", str(tmp_path)])
    assert refused.returncode == 2 and path.name in refused.stdout
    assert path.read_text() == "{ not json", "a corrupt baseline must not be overwritten without --force"
    forced = _run(["-m", "harness", "record-baseline", str(RECORDED), "--baselines", str(tmp_path), "--force"])
    assert forced.returncode == 0 and list(tmp_path.glob("*.corrupt-*"))


def test_the_check_tables_fit_an_80_column_terminal_without_cutting_a_name():
    from io import StringIO

    from rich.console import Console

    from harness.cli import outcome_tables
    from harness.results import Outcome

    checks = ("forward", "backward", "unwritten", "guards", "determinism", "gradcheck", "contract")
    outcomes = [Outcome(spec="add_mul_act", implementation=impl, dtype=dtype, check=check, status="passed",
                        examples=8, worst_score=0.82, seconds=1.5)
                for impl in ("triton", "cuda") for dtype in ("float32", "float16", "bfloat16") for check in checks]
    for width in (80, 160):
        out = StringIO()
        narrow = Console(file=out, width=width)
        for table in outcome_tables(outcomes, width=width):
            narrow.print(table)
        text = out.getvalue()
        assert max(len(line) for line in text.splitlines()) <= width
        assert "…" not in text, text  # nothing abbreviated by truncation
        assert all(check in text for check in checks) and "pass 0.82" in text
    noted = Outcome(spec="add_mul_act", implementation="triton", dtype="float16", check="forward", status="passed",
                    examples=8, worst_score=1.42, seconds=1.5)
    out = StringIO()
    for table in outcome_tables([noted], width=160):
        Console(file=out, width=160).print(table)
    assert "pass 1.42 note" in out.getvalue()  # a graded verdict: passed, beyond eager's own error


def test_the_pytest_summary_lists_the_passes_with_a_numerics_note():
    from types import SimpleNamespace

    from harness.pytest_plugin import pytest_terminal_summary

    lines: list[str] = []
    note = SimpleNamespace(when="call", user_properties=[
        ("harness_device", "cpu"), ("harness_worker", "gw0"),
        ("harness_note", "softmax[triton] backward (bfloat16): worst score 1.73")])
    plain = SimpleNamespace(when="call", user_properties=[("harness_device", "cpu"), ("harness_worker", "gw1")])
    reporter = SimpleNamespace(stats={"passed": [note, plain]}, section=lambda title: lines.append(f"== {title}"),
                               write_line=lines.append)
    pytest_terminal_summary(reporter, 0, None)
    text = "\n".join(lines)
    assert "== harness numerics notes" in text and "softmax[triton] backward (bfloat16): worst score 1.73" in text
    assert "== harness devices" in text and "gw1: 1 tests" in text
