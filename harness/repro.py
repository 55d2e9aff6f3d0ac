"""Standalone reproduction of a failing case: a script per failure, and the replay it calls.

A failure writes ``<repro dir>/<spec>-<impl>-<check>-<dtype>-<hash>.py`` holding the case as JSON
and the report that was printed. Running it rebuilds the exact tensors (same shapes, strides,
layouts, seeds) on this machine's device and runs the one check again. The directory is
``$HARNESS_REPRO_DIR`` or ``.harness/repros`` under the current directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from harness.case import Case
from harness.io import atomic_write_text

_TEMPLATE = '''"""Reproduces a harness failure. Run: python {name}

{report}
"""
import sys

from harness.repro import replay

CASE = {case!r}
IMPLEMENTATION = {implementation!r}
CHECK = {check!r}

if __name__ == "__main__":
    sys.exit(0 if replay(CASE, implementation=IMPLEMENTATION, check=CHECK) else 1)
'''


def repro_dir() -> Path:
    return Path(os.environ.get("HARNESS_REPRO_DIR", ".harness/repros"))


def write_repro(case: Case, implementation: str, check: str, report: str) -> str:
    """Write the repro script (atomically; same case, same file) and return its path."""
    text = case.dumps()
    digest = hashlib.sha256(f"{implementation}/{check}/{text}".encode()).hexdigest()[:10]
    path = repro_dir() / f"{case.spec}-{implementation}-{check}-{case.dtype}-{digest}.py"
    body = _TEMPLATE.format(name=path, report=report.replace('"""', "'''"), case=text,
                            implementation=implementation, check=check)
    atomic_write_text(path, body)
    return str(path)


def load_script(path: str) -> tuple[str, str, str]:
    """(case JSON, implementation, check) from a repro script, without running it."""
    import runpy

    namespace = runpy.run_path(path, run_name="harness_repro_load")
    try:
        return namespace["CASE"], namespace["IMPLEMENTATION"], namespace["CHECK"]
    except KeyError as missing:
        raise ValueError(f"{path} is not a harness repro script (no {missing.args[0]})") from None


def replay(case_json: str, implementation: str, check: str) -> bool:
    """Rebuild the case, run the check once, print what it found; True when it passes."""
    import json

    from harness.dispatch import run_check
    from harness.device import current_device, describe
    from harness.registry import load_specs

    case = Case.from_json(json.loads(case_json))
    specs = load_specs()
    if case.spec not in specs:
        raise SystemExit(f"no spec named {case.spec!r}; known: {sorted(specs)}")
    spec = specs[case.spec]
    if implementation not in spec.implementations:
        raise SystemExit(f"spec {spec.name!r} has no implementation {implementation!r}; it has {sorted(spec.implementations)}")
    device = current_device()
    fn = spec.implementations[implementation].load()
    result = run_check(spec, fn, check, case, device)
    print(f"{spec.name}[{implementation}] {check} on {describe(device)}: {'passed' if result.passed else 'FAILED'}")
    print(case.describe())
    if result.details():
        print(result.details())
    return result.passed


# ---- the case in flight -------------------------------------------------------------------------
# A kernel that corrupts host memory kills its process: no exception, no report. A worker process
# that is given an in-flight file (``set_inflight``: harness.parallel's workers, pytest-xdist's
# through the plugin) has each case written there before it runs (harness.runner), so that the
# process that sees it die (harness.parallel's parent, xdist's controller) can still name the case
# and write its repro script (``crash_report``). The file is this process's alone: never inherited
# through the environment, so a nested run cannot write into its parent's.

_inflight: Path | None = None


def set_inflight(path: Path | None) -> None:
    global _inflight
    _inflight = path


def record_inflight(case: Case, implementation: str, check: str) -> None:
    """Note the case about to run, where this process has an in-flight file (cheap: one small
    atomic write per case)."""
    if _inflight is not None:
        atomic_write_text(_inflight, json.dumps({"case": case.to_json(), "implementation": implementation,
                                                 "check": check}))


def clear_inflight() -> None:
    if _inflight is not None:
        _inflight.unlink(missing_ok=True)


def xdist_inflight_path(testrunuid: str, worker: str) -> Path:
    """Where an xdist worker of one test run keeps its in-flight case (both sides compute it)."""
    return Path(tempfile.gettempdir()) / f"harness-inflight-{testrunuid}" / f"{worker}.json"


def crash_report(path: Path) -> tuple[str, str | None]:
    """What a dead process's in-flight file says: the case it was running and how to reproduce it
    (with a repro script written), or that it was between cases; and the script's path."""
    try:
        record = json.loads(path.read_text())
        case = Case.from_json(record["case"])
        implementation, check = record["implementation"], record["check"]
    except (OSError, ValueError, KeyError, TypeError):
        return "it was not running a case (it died loading, compiling or between cases)", None
    lines = [f"it was running {case.spec}[{implementation}] {check} on this case:",
             *("  " + line for line in case.describe().splitlines()),
             "reproduce it in a process of its own (under compute-sanitizer on a GPU):",
             f"  harness repro '{case.dumps()}' --implementation {implementation} --check {check}"]
    script = write_repro(case, implementation, check, "\n".join(lines))
    lines.append(f"  python {script}")
    return "\n".join(lines), script
