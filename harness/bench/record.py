"""One benchmark record: what a nightly run writes for one implementation, figure and pass of one
benchmark shape. The fields, their JSON types and which of them older files may lack are declared
here once: ``harness.bench.runner`` builds records, ``harness.report.model`` validates results
files against :func:`schema`.

A field's ``schema`` is what the validator accepts: a Python type, a type name (``"number"``,
``"number|null"``, ``"interval|null"``, ...) or a tuple of allowed values. ``since_v1`` fields were
added within results version 1, so a file may lack them; ``only_if_set`` fields are written only
where they hold something (a recheck's failure line, the peer and tiny-shape flags).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.spec import FIGURES, PASSES

RECHECKS = ("passed", "failed", "n/a")
# how an implementation compares with the best peer: "faster" only where the ratio's whole 95%
# interval lies above 1, "slower" only where it lies below (harness.regression.speedup)
READINGS = ("faster", "tie", "slower", None)

_NUM = "number"
_OPT_NUM = "number|null"
_OPT_STR = "string|null"


def _field(schema: Any, *, json_name: str | None = None, since_v1: bool = False, only_if_set: bool = False,
           default: Any = dataclasses.MISSING) -> Any:
    if only_if_set and default is dataclasses.MISSING:
        raise ValueError("an only_if_set field needs a default (its unset value)")
    return dataclasses.field(default=default, metadata={
        "schema": schema, "json_name": json_name, "since_v1": since_v1 or only_if_set, "only_if_set": only_if_set})


@dataclass(frozen=True)
class BenchmarkRecord:
    key: str = _field(str)
    spec: str = _field(str)
    shape: dict = _field(dict)
    dtype: str = _field(str)
    scalars: dict = _field(dict)
    pass_: str = _field(PASSES, json_name="pass")
    implementation: str = _field(str)
    samples_ms: list = _field(list)
    median_ms: float = _field(_NUM)
    iqr_ms: float = _field(_NUM)
    bytes: float = _field(_NUM)
    flops: float = _field(_NUM)
    gbps: float | None = _field(_OPT_NUM)
    pct_copy_bw: float | None = _field(_OPT_NUM)
    tflops: float | None = _field(_OPT_NUM)
    pct_matmul: float | None = _field(_OPT_NUM)
    speedup_vs_eager: float | None = _field(_OPT_NUM)
    speedup_vs_compile: float | None = _field(_OPT_NUM)
    recheck: str = _field(RECHECKS)
    # device time or per-call wall time (absent in older files: device)
    figure: str = _field(FIGURES, since_v1=True, default="device")
    # harness.bench.timing's method name (absent in older files: L2 flushed by zeroing)
    timing: str = _field(str, since_v1=True, default="")
    copy_same_size_ms: float | None = _field(_OPT_NUM, since_v1=True, default=None)
    pct_same_size_copy: float | None = _field(_OPT_NUM, since_v1=True, default=None)
    # the fastest of eager, compile and the spec's peers in this figure, and this one against it
    best_peer: str | None = _field(_OPT_STR, since_v1=True, default=None)
    speedup_vs_best_peer: float | None = _field(_OPT_NUM, since_v1=True, default=None)
    vs_best_peer: str | None = _field(READINGS, since_v1=True, default=None)
    speedup_vs_best_peer_ci: list | None = _field("interval|null", since_v1=True, default=None)
    recheck_detail: str | None = _field(str, only_if_set=True, default=None)  # a failed recheck's first line
    peer: bool = _field(bool, only_if_set=True, default=False)  # a spec's optional third-party peer
    launch_overhead: bool = _field(bool, only_if_set=True, default=False)  # the tiny shape
    # what this implementation warned on its first call at this shape ("Category: message"): a
    # kernel that falls back to a slower path, a peer that recompiles, a failed native build
    warnings: tuple[str, ...] = _field(list, only_if_set=True, default=())  # a JSON list

    def to_json(self) -> dict[str, Any]:
        """The record as the results file holds it (field order kept; unset only_if_set fields left out)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata["only_if_set"] and not value:
                continue
            out[f.metadata["json_name"] or f.name] = list(value) if isinstance(value, tuple) else value
        return out


def warned(records: list[dict[str, Any]]) -> list[str]:
    """One line per (benchmark, implementation, warning) of a results file's records, each once
    (a warning shows on the device and the wall record of a call alike)."""
    lines = []
    for r in records:
        for warning in r.get("warnings") or ():
            shape = "x".join(str(v) for v in r["shape"].values())
            lines.append(f"{r['spec']} {r['pass']} {shape} {r['dtype']} {r['implementation']}: {warning}")
    return list(dict.fromkeys(lines))


def schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fields every record has, the fields a file written within version 1 may lack), each
    as ``{JSON name: schema}`` for ``harness.report.model``'s validator."""
    required, optional = {}, {}
    for f in dataclasses.fields(BenchmarkRecord):
        (optional if f.metadata["since_v1"] else required)[f.metadata["json_name"] or f.name] = f.metadata["schema"]
    return required, optional
