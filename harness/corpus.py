"""The failure corpus: every counterexample a run finds is kept and replayed first by every later
run, whatever its profile, until it passes.

Hypothesis's own example database is not enough here: the ``ci`` profile is derandomized, which
turns the database off, and a database entry is Hypothesis's internal choice sequence, which a new
version of a strategy reads differently. The corpus keeps what the harness prints anyway, the case
itself (``harness.case.Case``, the JSON that ``harness repro`` takes), one file per failure:

    .harness/corpus/<spec>-<implementation>-<dtype>-<check>-<hash>.json
    {"spec": ..., "implementation": ..., "dtype": ..., "check": ..., "found": ISO time,
     "reason": the failure's first line, "case": {case JSON}}

``HARNESS_CORPUS`` names another folder (a CI cache or artifact shared between runs:
examples/ci/github-actions-gpu.yml). A property replays its entries as Hypothesis explicit
examples, before any generated case; one that passes is removed (the bug it showed is fixed); one
that fails fails the property at once, unshrunk. A case can be added by hand with
``harness corpus add '<case json>' --implementation NAME --check CHECK``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.case import Case
from harness.io import atomic_write_text


def corpus_dir() -> Path:
    return Path(os.environ.get("HARNESS_CORPUS", ".harness/corpus"))


@dataclass(frozen=True)
class Entry:
    path: Path
    implementation: str
    check: str
    case: Case
    reason: str


def _name(case: Case, implementation: str, check: str) -> str:
    digest = hashlib.sha256(f"{implementation}/{check}/{case.dumps()}".encode()).hexdigest()[:12]
    return f"{case.spec}-{implementation}-{case.dtype}-{check}-{digest}.json"


def add(case: Case, implementation: str, check: str, reason: str) -> Path:
    """Keep a failing case (idempotent: the same failure is one file)."""
    path = corpus_dir() / _name(case, implementation, check)
    if not path.exists():
        record = {"spec": case.spec, "implementation": implementation, "dtype": case.dtype, "check": check,
                  "found": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reason": reason,
                  "case": case.to_json()}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True))
    return path


def entries(spec: str | None = None, implementation: str | None = None, dtype: str | None = None,
            check: str | None = None) -> Iterator[Entry]:
    """The corpus's entries, those of one property where named. An unreadable file is skipped
    with a warning naming it, never deleted: it may be someone's hand-written case."""
    folder = corpus_dir()
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            case = Case.from_json(record["case"])
            entry = Entry(path, record["implementation"], record["check"], case, record.get("reason", ""))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            import warnings

            warnings.warn(f"failure corpus: cannot read {path} ({exc}); left in place", stacklevel=2)
            continue
        if ((spec is None or case.spec == spec) and (implementation is None or entry.implementation == implementation)
                and (dtype is None or case.dtype == dtype) and (check is None or entry.check == check)):
            yield entry


def drop(entry: Entry) -> None:
    """Forget a case that passes now."""
    entry.path.unlink(missing_ok=True)
