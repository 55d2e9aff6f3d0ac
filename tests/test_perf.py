"""Performance gate (``pytest -m perf`` on a GPU): each spec's quick benchmark shapes, timed side by
side with eager and torch.compile, re-checked for correctness, and judged against the recorded
baseline with the harness's statistical rule. Without a GPU these tests skip with that reason."""

from pathlib import Path

from harness.bench.roofline import measure
from harness.bench.runner import bench_spec
from harness.baseline import BaselineStore
from harness.nightly import device_name, judge, software


def test_no_regression_against_baseline(harness_perf_spec, request):
    device = request.config._harness_device
    records = bench_spec(harness_perf_spec, device, measure(device.index or 0), quick=True)
    assert records, f"{harness_perf_spec.name} declares no quick benchmark shape"
    bad_rechecks = [r["key"] + ": " + r["recheck"] + " " + r.get("recheck_detail", "") for r in records if r["recheck"] not in ("passed", "n/a")]
    assert not bad_rechecks, "kernel result wrong on benchmark inputs:\n" + "\n".join(bad_rechecks)
    versions = software()
    baseline = BaselineStore(Path("benchmarks/baselines")).load(device_name(device), versions["torch"], versions["triton"])
    regressions = [v for v in judge(records, baseline, None) if v["verdict"] == "regression"]
    assert not regressions, "\n".join(f"{v['key']}: {v['reason']}" for v in regressions)
