"""The baseline store: the timings that today's benchmarks are judged against, kept in the repo.

Timings only compare on the same hardware and software, so there is one JSON file per (device
name, torch version, triton version), named by a filesystem-safe slug of the three::

    benchmarks/baselines/nvidia-h100-80gb-hbm3__torch-2.11.0+cu130__triton-3.6.0.json

    {"schema": "harness-baseline", "version": 1,
     "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "triton": "3.6.0",
     "records": {KEY: {"samples_ms": [...], "median_ms": 0.123,
                       "recorded_at": "2025-01-01T12:00:00+00:00", "commit": "abc123" | null,
                       "timing": "cuda-events/spin/l2-read-flush"}}}

KEY is the caller's opaque benchmark key (``softmax/forward/cols=1024,rows=8192/float16/triton``).
Each record sits on one line, sorted by key, so a re-recorded benchmark is a one-line diff.
``timing`` names how the samples were taken (``harness.bench.timing.TIMING_METHOD``); a record
without one (or with null) predates the field (L2 flushed by zeroing), and ``timing_of`` reports
it as ``UNNAMED_TIMING``. Readers compare a run only with records of its own method.

Baselines are shared history, so the store is careful with them:

* a missing file is an empty baseline (a new device or toolchain starts from nothing), but a
  corrupt one is an error that names the file and the fix: ``BaselineError`` is raised, never an
  empty result that would silently turn every benchmark into "no baseline";
* ``update`` merges: keys it is given are replaced, every other key is kept, other devices' files
  are never opened; it refuses to overwrite a corrupt file unless ``force=True``, and even then
  first renames the corrupt file to ``<name>.corrupt-<UTC timestamp>`` so nothing is lost;
* every write goes through ``harness.io.atomic_write_text``: a file is replaced whole or not at all.

Concurrent ``update`` calls on the same file are not serialised: the last writer wins.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.io import atomic_write_text

SCHEMA = "harness-baseline"
VERSION = 1
DEFAULT_DIRECTORY = Path("benchmarks/baselines")
RECORD_FIELDS = ("samples_ms", "median_ms", "recorded_at", "commit")
UNNAMED_TIMING = "unnamed (recorded before records named their timing method: L2 flushed by zeroing)"

_FIX = (
    "restore it from git (git checkout -- {path}) or re-record it with "
    "`harness bench --update-baseline` (an update with force=True moves the bad file aside first)"
)


class BaselineError(RuntimeError):
    """A baseline file is unreadable or malformed; the message names the file and how to fix it."""


def slug(text: str) -> str:
    """Lower-case ``text`` and keep ``[a-z0-9.+-]``; any other run of characters becomes one ``-``.

    ``_`` is replaced too, so the ``__`` that separates the three parts of a file name cannot occur
    inside one. Distinct names can share a slug; ``load`` catches that by checking the identity
    stored in the file.
    """
    return re.sub(r"[^a-z0-9.+-]+", "-", text.lower()).strip("-.")


def _check_name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    if not slug(value):
        raise ValueError(f"{name} = {value!r} has no letters or digits to name a file with")
    return value


def _check_samples(value: Any, name: str) -> list[float]:
    """A non-empty list of positive finite timings in ms, or a ValueError naming ``name``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{name} must be a non-empty list of timings in ms, got {value!r:.80}")
    samples = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name}[{i}] = {v!r}: timings must be positive finite numbers (ms)")
        samples.append(float(v))
    return samples


def timing_of(record: Mapping[str, Any]) -> str:
    """The timing method a stored or measured record was taken with (``UNNAMED_TIMING`` if none)."""
    return record.get("timing") or UNNAMED_TIMING


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class BaselineStore:
    """Baseline files under ``directory`` (relative paths resolve against the working directory)."""

    def __init__(self, directory: str | Path = DEFAULT_DIRECTORY) -> None:
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"BaselineStore({str(self.directory)!r})"

    # ---- naming --------------------------------------------------------------------------
    def path_for(self, device: str, torch_version: str, triton_version: str) -> Path:
        """The file holding the baselines of this (device, torch, triton); it need not exist."""
        parts = (
            slug(_check_name(device, "device")),
            "torch-" + slug(_check_name(torch_version, "torch_version")),
            "triton-" + slug(_check_name(triton_version, "triton_version")),
        )
        return self.directory / ("__".join(parts) + ".json")

    # ---- reading -------------------------------------------------------------------------
    def load(self, device: str, torch_version: str, triton_version: str) -> dict[str, dict[str, Any]]:
        """The records of this key: ``{benchmark key: record}``; empty when there is no file yet.

        Raises ``BaselineError`` when the file exists but is not a valid baseline of this key.
        """
        path = self.path_for(device, torch_version, triton_version)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise _error(path, f"cannot be read ({exc})") from None
        return _parse(path, text, (device, torch_version, triton_version))

    # ---- writing -------------------------------------------------------------------------
    def update(
        self,
        device: str,
        torch_version: str,
        triton_version: str,
        records: Mapping[str, Sequence[float] | Mapping[str, Any]],
        commit: str | None = None,
        *,
        timing: str | None = None,
        force: bool = False,
    ) -> Path:
        """Merge ``records`` into the file of this key and return its path.

        ``records`` maps each benchmark key to its samples in ms, or to a mapping with a
        ``samples_ms`` list and optionally the ``timing`` method they were taken with (else
        ``timing``; with neither, the record names no method). Those keys are replaced, with the
        median, the current UTC time and ``commit``; other keys are kept. A corrupt existing file
        raises ``BaselineError`` unless ``force``, which renames it to
        ``<name>.corrupt-<UTC timestamp>`` and starts afresh.
        """
        path = self.path_for(device, torch_version, triton_version)
        if commit is not None and not isinstance(commit, str):
            raise ValueError(f"commit must be a string or None, got {commit!r}")
        _check_timing(timing, "timing", optional=True)
        now = _utc_now()
        new = _new_records(records, commit, now.isoformat(timespec="seconds"), timing)
        try:
            merged = self.load(device, torch_version, triton_version)
        except BaselineError:
            if not force:
                raise
            _preserve(path, now)
            merged = {}
        merged.update(new)
        atomic_write_text(path, _render(device, torch_version, triton_version, merged))
        return path


# ---- helpers ---------------------------------------------------------------------------------
def _error(path: Path, problem: str) -> BaselineError:
    return BaselineError(f"baseline file {path} {problem}; {_FIX.format(path=path)}")


def _check_timing(value: Any, name: str, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string naming a timing method, got {value!r}")
    return value


def _new_records(records: Any, commit: str | None, recorded_at: str, timing: str | None) -> dict[str, dict[str, Any]]:
    if not isinstance(records, Mapping) or not records:
        raise ValueError(f"records must be a non-empty mapping of benchmark key to samples, got {records!r:.80}")
    out = {}
    for key, value in records.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"records: every benchmark key must be a non-empty string, got {key!r}")
        method = timing
        if isinstance(value, Mapping):
            if "samples_ms" not in value:
                raise ValueError(f"records[{key!r}] has no 'samples_ms'")
            if value.get("timing") is not None:
                method = _check_timing(value["timing"], f"records[{key!r}]['timing']", optional=False)
            value = value["samples_ms"]
        samples = _check_samples(value, f"records[{key!r}]")
        out[key] = {
            "samples_ms": samples,
            "median_ms": float(statistics.median(samples)),
            "recorded_at": recorded_at,
            "commit": commit,
        }
        if method is not None:
            out[key]["timing"] = method
    return out


def _parse(path: Path, text: str, identity: tuple[str, str, str]) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(path, f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _error(path, f"holds a {type(data).__name__}, not a JSON object")
    if data.get("schema") != SCHEMA:
        raise _error(path, f"has schema {data.get('schema')!r}, expected {SCHEMA!r}")
    if data.get("version") != VERSION:
        raise _error(path, f"has version {data.get('version')!r}; this harness reads version {VERSION}")
    for field, expected in zip(("device", "torch", "triton"), identity):
        if data.get(field) != expected:
            raise _error(
                path, f"records {field} {data.get(field)!r}, not {expected!r} (a renamed file, or two "
                f"names that share a file name)"
            )
    records = data.get("records")
    if not isinstance(records, dict):
        raise _error(path, f"has 'records' of type {type(records).__name__}, expected an object")
    for key, record in records.items():
        problem = _record_problem(key, record)
        if problem:
            raise _error(path, f"has a malformed record {key!r}: {problem}")
    return records


def _record_problem(key: str, record: Any) -> str | None:
    """What is wrong with one stored record, or None."""
    if not key:
        return "empty benchmark key"
    if not isinstance(record, dict):
        return f"a {type(record).__name__}, not an object"
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing:
        return f"missing {', '.join(missing)}"
    try:
        _check_samples(record["samples_ms"], "samples_ms")
    except ValueError as exc:
        return str(exc)
    median = record["median_ms"]
    if isinstance(median, bool) or not isinstance(median, (int, float)) or not math.isfinite(median) or median <= 0:
        return f"median_ms = {median!r} is not a positive finite number"
    try:
        datetime.fromisoformat(record["recorded_at"])
    except (TypeError, ValueError):
        return f"recorded_at = {record['recorded_at']!r} is not an ISO 8601 time"
    if record["commit"] is not None and not isinstance(record["commit"], str):
        return f"commit = {record['commit']!r} is neither a string nor null"
    try:
        _check_timing(record.get("timing"), "timing", optional=True)  # null: unnamed
    except ValueError as exc:
        return str(exc)
    return None


def _preserve(path: Path, now: datetime) -> Path:
    """Rename a corrupt file out of the way (never over an earlier preserved copy)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    path.rename(target)
    return target


def _render(device: str, torch_version: str, triton_version: str, records: Mapping[str, Any]) -> str:
    """The file's text: a fixed header, then one line per record, sorted by key (small diffs)."""
    header = {"schema": SCHEMA, "version": VERSION, "device": device, "torch": torch_version, "triton": triton_version}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in header.items()]
    body = [
        f"    {json.dumps(key)}: {json.dumps({**{f: records[key][f] for f in RECORD_FIELDS}, **records[key]})}"
        for key in sorted(records)
    ]
    if body:
        lines += ['  "records": {', ",\n".join(body), "  }", "}"]
    else:
        lines += ['  "records": {}', "}"]
    return "\n".join(lines) + "\n"
