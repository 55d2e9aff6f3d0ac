"""Benchmark records: one declaration of the fields (harness.bench.record), written by the runner
and checked by the report's validator from that same declaration."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from harness.bench.record import BenchmarkRecord, schema
from harness.report import ReportError, load_results
from tests.unit.test_report import make_results


def _record(**changes) -> BenchmarkRecord:
    fields = dict(key="k", spec="softmax", shape={"rows": 8, "cols": 64}, dtype="float16", scalars={},
                  pass_="forward", implementation="triton", samples_ms=[0.1, 0.11], median_ms=0.105,
                  iqr_ms=0.005, bytes=2048.0, flops=0.0, gbps=19.5, pct_copy_bw=1.0, tflops=None,
                  pct_matmul=None, speedup_vs_eager=1.5, speedup_vs_compile=1.2, recheck="passed",
                  figure="wall", timing="wall", best_peer="compile", speedup_vs_best_peer=1.2,
                  vs_best_peer="faster", speedup_vs_best_peer_ci=[1.1, 1.3])
    fields.update(changes)
    return BenchmarkRecord(**fields)


def test_a_record_names_pass_as_the_file_does_and_leaves_out_unset_flags():
    out = _record().to_json()
    assert out["pass"] == "forward" and "pass_" not in out
    assert not {"recheck_detail", "peer", "launch_overhead"} & set(out)
    flagged = _record(recheck="failed", recheck_detail="forward: score 3", peer=True, launch_overhead=True).to_json()
    assert flagged["recheck_detail"] == "forward: score 3" and flagged["peer"] is True and flagged["launch_overhead"] is True


def test_the_validator_knows_every_field_of_the_record():
    required, optional = schema()
    names = {f.metadata["json_name"] or f.name for f in dataclasses.fields(BenchmarkRecord)}
    assert set(required) | set(optional) == names and not set(required) & set(optional)
    # the older-file fields (added within version 1) are the optional ones
    assert {"figure", "best_peer", "launch_overhead"} <= set(optional) and {"key", "pass", "median_ms"} <= set(required)


def _results_with(record: dict) -> dict:
    data = make_results()
    data["benchmarks"] = [record]
    return data


def test_a_written_record_loads_and_a_wrong_one_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results_with(_record().to_json())))
    assert load_results(path)["benchmarks"][0]["implementation"] == "triton"
    for field, value, expected in (("vs_best_peer", "maybe", "vs_best_peer"), ("pass", "sideways", "pass"),
                                   ("median_ms", "fast", "median_ms")):
        bad = copy.deepcopy(_record().to_json())
        bad[field] = value
        path.write_text(json.dumps(_results_with(bad)))
        with pytest.raises(ReportError, match=expected):
            load_results(path)
    missing = _record().to_json()
    del missing["recheck"]
    path.write_text(json.dumps(_results_with(missing)))
    with pytest.raises(ReportError, match="recheck"):
        load_results(path)
