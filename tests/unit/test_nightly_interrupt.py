"""``harness nightly`` stopped by SIGTERM (a CI job's time limit) writes every report with what
finished, marked incomplete, and exits with its own code (``harness.cli.EXIT_INCOMPLETE``)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import EXIT_INCOMPLETE
from harness.results import INTERRUPTED_MESSAGE

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


@pytest.mark.parametrize("jobs", [None, 2])
def test_sigterm_during_verification_leaves_every_report_marked_incomplete(tmp_path, jobs):
    out = tmp_path / "out"
    env = {**os.environ, "HARNESS_SPECS": "parallel_specs", "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]),
           "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "harness", "nightly", "par_checked", "par_slow", "--out", str(out), "--profile", "ci"]
    command += ["--jobs", str(jobs)] if jobs else []
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    lines = []
    deadline = time.monotonic() + 120
    for line in process.stdout:  # wait until verification is under way (par_slow: 5 s a call)
        lines.append(line)
        if "par_slow" in line or "verified" in line or time.monotonic() > deadline:
            break
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=120)
    output = "".join(lines) + rest
    assert process.returncode == EXIT_INCOMPLETE, output
    assert "Traceback" not in output and "@seed" not in output, output
    assert {p.name for p in out.iterdir()} >= {"results.json", "summary.md", "junit.xml", "report.html"}
    results = json.loads((out / "results.json").read_text())
    assert results["incomplete"].startswith("interrupted during verification")
    slow = [o for o in results["verification"] if o["spec"] == "par_slow"]
    unfinished = [o for o in slow if o["status"] == "skipped" and o["message"] == INTERRUPTED_MESSAGE]
    assert unfinished and all(o["status"] == "passed" for o in slow if o not in unfinished)  # none failed
    assert any(o["spec"] == "par_checked" and o["status"] == "passed" for o in results["verification"])
    assert "This run is incomplete" in (out / "summary.md").read_text()
    assert "This run is incomplete" in (out / "report.html").read_text()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the default profile is nightly itself")
def test_on_a_cpu_the_nightly_picks_the_ci_profile_and_says_so(tmp_path):
    env = {**os.environ, "HARNESS_SPECS": "parallel_specs", "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "harness", "nightly", "par_checked", "--out", str(tmp_path / "out")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no GPU: verifying with the ci profile" in done.stdout
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["run"]["profile"].startswith("ci") and results["incomplete"] is None
