"""Standalone reproduction of a failing case: a script per failure, and the replay it calls.

A failure writes ``<repro dir>/<spec>-<impl>-<check>-<dtype>-<hash>.py`` holding the case as JSON
and the report that was printed. Running it rebuilds the exact tensors (same shapes, strides,
layouts, seeds) on this machine's device and runs the one check again. The directory is
``$HARNESS_REPRO_DIR`` or ``.harness/repros`` under the current directory.
"""

from __future__ import annotations

import hashlib
import os
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

    from harness.checks import run_check
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
