"""The benchmark runner's plumbing with real inputs and calls and a fake clock, on the kernels'
device (the interpreter on a CPU machine; a GPU runner's ``pytest -n auto`` runs them on CUDA).

Timing itself needs a GPU; everything around it (cases at benchmark shapes, forward and
forward+backward calls for every implementation, the re-check, bytes and roofline arithmetic,
verdicts against a baseline) is exercised here with the timer replaced.
"""

import dataclasses
import statistics

import pytest
import torch

import harness.bench.runner as runner
import harness.bench.timing as timing
from harness.bench.roofline import Roofline
from harness.nightly import judge
from harness.registry import load_specs
from harness.report import validate_results
from harness.regression import reference_drift
from harness.report.html import html_report
from harness.runner import skip_reason
from harness.spec import BenchShape, SpecError
from kernels._runtime import kernel_device_type
from tests.unit.test_report import make_results

_DEVICE = torch.device(kernel_device_type())  # where the kernels accept their inputs


@pytest.fixture
def fake_clock(monkeypatch):
    calls = []

    def fake_time(calls_by_name, device, plan):
        out = {}
        for name, call in calls_by_name.items():
            for i in range(plan.input_sets):
                call(i)  # really run every implementation on every input set
            calls.append(name)
            out[name] = [1.0 + 0.01 * k for k in range(plan.repetitions)] if name != "triton" else [0.5] * plan.repetitions
        return out

    def fake_wall(calls_by_name, device, batch, plan):
        assert batch >= timing.WALL_MIN_CALLS
        for call in calls_by_name.values():
            call(0)
        calls.append("wall")
        # per call, host included: here the kernel is slower than eager (a slow launch path)
        return {name: [3.0] * plan.wall_repetitions if name == "triton" else [2.0 + 0.01 * k for k in range(plan.wall_repetitions)]
                for name in calls_by_name}

    monkeypatch.setattr(runner, "time_interleaved", fake_time)
    monkeypatch.setattr(runner, "time_wall", fake_wall)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # no inductor build on the CPU runner
    return calls


def _small(spec_name, dims, dtype, scalars=None):
    spec = load_specs()[spec_name]
    perf = dataclasses.replace(spec.perf, shapes=(BenchShape(dims, dtype, scalars or {}, quick=True),))
    return dataclasses.replace(spec, perf=perf)


@pytest.mark.parametrize("name, dims, dtype, scalars", [
    ("softmax", {"rows": 4, "cols": 100}, "float16", {}),
    ("add_mul_act", {"rows": 5, "cols": 33}, "float32", {"alpha": 0.5, "activation": "silu"}),
])
def test_bench_spec_records_every_implementation_and_pass(fake_clock, name, dims, dtype, scalars):
    spec = _small(name, dims, dtype, scalars)
    records = runner.bench_spec(spec, _DEVICE, Roofline(copy_gbps=1000.0, matmul_tflops=100.0),
                                quick=True, plan=runner.TimingPlan(repetitions=12, input_sets=2))
    assert runner.SAME_SIZE_COPY in fake_clock  # timed, and not reported as an implementation
    runnable = {i for i in spec.implementations if skip_reason(spec, i, _DEVICE) is None}  # add_mul_act's CUDA one on a GPU
    assert "triton" in runnable
    tiny = runner.launch_shape(spec)
    for shape in (spec.perf.shapes[0].dims, tiny.dims):  # the benchmark shape, then the launch-overhead one
        assert {(r["pass"], r["implementation"], r["figure"]) for r in records if r["shape"] == shape} == {
            (p, i, f) for p in ("forward", "forward_backward") for i in runnable | {"eager", "compile"}
            for f in ("device", "wall")}
    assert all(v == 1 for v in tiny.dims.values()) and all(bool(r.get("launch_overhead")) == (r["shape"] == tiny.dims) for r in records)
    for r in records:
        assert r["median_ms"] > 0 and r["bytes"] > 0 and r["gbps"] == pytest.approx(r["bytes"] / r["median_ms"] / 1e6)
        assert r["pct_copy_bw"] == pytest.approx(100 * r["gbps"] / 1000.0)
        assert r["recheck"] == ("n/a" if r["implementation"] in ("eager", "compile") else "passed")
        if r["figure"] == "device":
            # the same-size copy is timed beside the implementations (fake clock: ~1.055 ms median)
            assert r["copy_same_size_ms"] == pytest.approx(1.055)
            assert r["pct_same_size_copy"] == pytest.approx(100 * r["copy_same_size_ms"] / r["median_ms"])
            assert r["timing"] == runner.TIMING_METHOD and "/wall/" not in r["key"]
        else:
            assert r["copy_same_size_ms"] is None and r["pct_same_size_copy"] is None
            assert r["timing"] == runner.WALL_TIMING_METHOD and r["key"].endswith(f"/wall/{r['implementation']}")
        assert r["best_peer"] == "eager"  # the fake clock makes eager the fastest context in both figures
    triton_fwd = [r for r in records if r["implementation"] == "triton" and r["pass"] == "forward" and not r.get("launch_overhead")]
    device, wall = sorted(triton_fwd, key=lambda r: r["figure"])
    assert device["speedup_vs_eager"] > 1.9 and device["key"].startswith(f"{name}/forward/")
    assert device["speedup_vs_best_peer"] == device["speedup_vs_eager"]
    eager_wall = statistics.median(2.0 + 0.01 * k for k in range(timing.TimingPlan().wall_repetitions))
    assert wall["speedup_vs_best_peer"] == pytest.approx(eager_wall / 3.0)  # slower per call: below 1
    assert (device["vs_best_peer"], wall["vs_best_peer"]) == ("faster", "slower")
    assert wall["speedup_vs_best_peer_ci"][1] < 1.0 < device["speedup_vs_best_peer_ci"][0]
    assert "wall" in fake_clock


def test_recheck_catches_a_kernel_that_skips_work(fake_clock):
    spec = _small("softmax", {"rows": 3, "cols": 50}, "float32")
    lazy = dataclasses.replace(spec, implementations={"triton": lambda x: torch.empty_like(x).fill_(0.02)})
    records = runner.bench_spec(lazy, _DEVICE, None, quick=True,
                                plan=runner.TimingPlan(repetitions=12, input_sets=1))
    lazy_fwd = [r for r in records if r["implementation"] == "triton" and r["pass"] == "forward"]
    assert lazy_fwd and all(r["recheck"] == "failed" and "OVER budget" in r["recheck_detail"] for r in lazy_fwd)
    # The records of a failed recheck are valid results, as the nightly report reads them.
    results = validate_results({**make_results(), "benchmarks": records, "regressions": []})
    assert 'class="recheck-failed" title="' in html_report(results)


def test_judge_flags_against_baseline_and_says_when_none_or_unreadable():
    record = {"key": "k", "spec": "s", "implementation": "triton", "median_ms": 1.05,
              "samples_ms": [1.05 + 0.001 * (i % 5) for i in range(40)]}
    eager = {**record, "key": "e", "implementation": "eager"}
    slow = judge([record, eager], {"k": {"samples_ms": [1.0 + 0.001 * (i % 5) for i in range(40)], "median_ms": 1.0}}, None)
    assert [v["verdict"] for v in slow] == ["regression"], "eager/compile are context, not judged"
    assert judge([record], {}, None)[0]["verdict"] == "no-baseline"
    assert judge([record], None, "file.json is corrupt")[0]["verdict"] == "baseline-unreadable"


def test_judge_compares_only_timings_of_one_method():
    """A baseline timed with L2 flushed by zeroing charged 33.5 MB ops for 33 MB of write-backs
    (harness.bench.timing): judged against a run of the reading flush, every such op would be an
    "improvement". Records of two methods get no verdict, and say why; nor do references of another
    method count as the machine's drift."""
    old = [1.3 + 0.001 * (i % 5) for i in range(40)]
    new = [1.0 + 0.001 * (i % 5) for i in range(40)]
    record = {"key": "k", "spec": "s", "implementation": "triton", "median_ms": 1.0, "samples_ms": new,
              "timing": runner.TIMING_METHOD}
    unnamed = {"k": {"samples_ms": old, "median_ms": 1.3}}
    (v,) = judge([record], unnamed, None)
    assert v["verdict"] == "no-baseline" and "another method" in v["reason"] and runner.TIMING_METHOD in v["reason"]
    assert v["baseline_median_ms"] == 1.3
    same = {"k": {"samples_ms": old, "median_ms": 1.3, "timing": runner.TIMING_METHOD}}
    assert judge([record], same, None)[0]["verdict"] == "improvement"
    # eager and compile recorded under the old method: no drift is divided out of the kernel's ratio
    # (taken for drift, the references' 4% would make the kernel's 4% unchanged)
    refs = [{**record, "key": f"s/forward/n=1/float16/{impl}", "implementation": impl, "median_ms": 1.04,
             "samples_ms": [1.04 * t for t in new]} for impl in ("eager", "compile")]
    kernel = {**record, "key": "s/forward/n=1/float16/triton", "samples_ms": [1.04 * t for t in new], "median_ms": 1.04}
    baseline = {**{r["key"]: {"samples_ms": new, "median_ms": 1.0} for r in refs},
                kernel["key"]: {"samples_ms": new, "median_ms": 1.0, "timing": runner.TIMING_METHOD}}
    (v,) = judge([kernel, *refs], baseline, None)
    assert v["verdict"] == "regression" and v["drift"] is None
    for r in baseline.values():
        r["timing"] = runner.TIMING_METHOD
    (v,) = judge([kernel, *refs], baseline, None)
    assert v["verdict"] == "unchanged" and v["drift"] == pytest.approx(1.04)


def _timings(median, n=40):
    return [median * (1.0 + 0.002 * (i % 5 - 2)) for i in range(n)]


def _run(kernel_ms, reference_ms):
    """A kernel's and its references' records at one shape, and their baselines at 1.0 ms."""
    records = [{"key": f"s/forward/n=1/float16/{impl}", "spec": "s", "implementation": impl, "median_ms": ms,
                "samples_ms": _timings(ms)} for impl, ms in (("triton", kernel_ms), *reference_ms.items())]
    baseline = {r["key"]: {"samples_ms": _timings(1.0), "median_ms": 1.0} for r in records}
    return judge(records, baseline, None)


@pytest.mark.parametrize("kernel_ms, reference_ms, verdict, drift", [
    (1.02, {"eager": 1.02, "compile": 1.02}, "unchanged", 1.02),  # the whole machine 2% slower
    (1.07, {"eager": 1.02, "compile": 1.02}, "regression", 1.02),  # 5% beyond the machine's 2%
    (0.97, {"eager": 1.02, "compile": 1.01}, "improvement", (1.02 * 1.01) ** 0.5),
    (1.05, {"eager": 1.0, "compile": 1.0}, "regression", 1.0),
    (1.05, {"eager": 1.12, "compile": 1.0}, "regression", None),  # a reference moved 12%: not drift
    # compile alone 4.6% faster (the H100, results/2026-11-24-h100-8 call 7): not drift, and the
    # kernel level with its baseline stays unchanged instead of 2.8% "slower"
    (1.005, {"eager": 1.001, "compile": 0.954}, "unchanged", None),
    (1.0, {"eager": 1.02, "compile": 1.005}, "unchanged", (1.02 * 1.005) ** 0.5),  # 1.5% apart: still drift
    (1.05, {}, "regression", None),  # no references: judged as measured
])
def test_judge_divides_out_the_drift_its_references_measure(kernel_ms, reference_ms, verdict, drift):
    (v,) = _run(kernel_ms, reference_ms)
    assert v["verdict"] == verdict, v["reason"]
    assert v["drift"] == pytest.approx(drift) if drift is not None else v["drift"] is None
    if reference_ms:
        assert ("divided out" if drift else "judged as measured") in v["reason"]


@pytest.mark.parametrize("ratios, why", [
    ({"eager": 1.12, "compile": 1.0}, "references moved too far"),
    ({"eager": 1.001, "compile": 0.954}, "references disagree"),  # each within MAX_DRIFT, 4.9% apart
    ({"eager": 1.02, "compile": 1.005}, "drift divided out"),
])
def test_reference_drift_says_which_rule_decided(ratios, why):
    drift, reason = reference_drift(ratios)
    assert why in reason
    assert (drift is None) == (why != "drift divided out")


def test_peers_are_timed_beside_eager_as_context_never_rechecked_or_judged(fake_clock):
    spec = _small("softmax", {"rows": 3, "cols": 40}, "float32")
    wrong_peer = lambda x: torch.zeros_like(x)  # noqa: E731 - a peer's output is not the harness's to judge
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, peers={"library": wrong_peer}))
    records = runner.bench_spec(spec, _DEVICE, None, quick=True,
                                plan=runner.TimingPlan(repetitions=12, input_sets=1))
    peer = [r for r in records if r["implementation"] == "library"]
    # two passes, two figures, at the benchmark shape and the launch-overhead shape
    assert len(peer) == 8 and all(r["peer"] and r["recheck"] == "n/a" for r in peer)
    assert all("peer" not in r for r in records if r["implementation"] != "library")
    assert {v["implementation"] for v in judge(records, {}, None)} == {"triton"}
    assert len(judge(records, {}, None)) == 8


def test_an_optional_peer_that_is_not_installed_is_named_with_how_to_install_it(fake_clock):
    from harness.spec import OptionalPeer

    def load():
        import a_library_that_is_not_installed  # noqa: F401

    spec = _small("softmax", {"rows": 3, "cols": 40}, "float32")
    present = OptionalPeer("present", lambda: (lambda x: torch.softmax(x, -1)), "pip install present")
    missing = OptionalPeer("missing", load, "pip install missing-lib")
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, peers={"present": present, "missing": missing}))
    not_run: list[str] = []
    peers_not_timed: list[str] = []
    records = runner.bench_spec(spec, _DEVICE, None, quick=True, plan=runner.TimingPlan(repetitions=12, input_sets=1),
                                not_run=not_run, peers_not_timed=peers_not_timed)
    assert {r["implementation"] for r in records if r.get("peer")} == {"present"}
    assert not_run == []  # a missing library is not a shape left out
    (line,) = peers_not_timed
    assert line.startswith("softmax peer missing: missing: No module named") and "pip install missing-lib" in line


@pytest.mark.filterwarnings("ignore:the fast path is off here")  # the timed calls warn again
def test_a_warning_on_an_implementations_first_call_is_kept_in_its_records_and_shown_in_the_reports(fake_clock):
    """A kernel that falls back to a slower path, or a native build that failed, warns once: the
    benchmark keeps what each implementation warned on its first call at each shape, and the
    summary and the HTML report show it, where a log line alone would be lost."""
    import warnings

    from harness.report.markdown import render_markdown

    def falls_back(x):
        warnings.warn("the fast path is off here: a slower one runs", RuntimeWarning)
        return torch.softmax(x, -1)

    spec = _small("softmax", {"rows": 3, "cols": 40}, "float32")
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, peers={"library": falls_back}))
    records = runner.bench_spec(spec, _DEVICE, None, quick=True, plan=runner.TimingPlan(repetitions=12, input_sets=1))
    peer = [r for r in records if r["implementation"] == "library"]
    assert peer and all(r["warnings"] == ["RuntimeWarning: the fast path is off here: a slower one runs"] for r in peer)
    assert all("warnings" not in r for r in records if r["implementation"] != "library")
    results = make_results()
    results["benchmarks"] = records
    results = validate_results(results)
    line = "softmax forward 3x40 float32 library: RuntimeWarning: the fast path is off here"
    assert line in render_markdown(results) and line in html_report(results)
    assert render_markdown(results).count(line) == 1  # the device and the wall record say it once


@pytest.mark.parametrize("peers, message", [
    ({"eager": lambda x: x}, "perf.peers"),
    ({"triton": lambda x: x}, "already an implementation"),
    ({"library": 3}, "must be callable or an OptionalPeer"),
])
def test_malformed_peers_name_the_field(peers, message):
    spec = load_specs()["softmax"]
    with pytest.raises(SpecError, match=message):
        dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, peers=peers))


def test_a_shape_that_raises_is_recorded_and_the_sweep_goes_on(fake_clock):
    spec = load_specs()["softmax"]
    shapes = (BenchShape({"rows": 3, "cols": 40}, "float32", quick=True), BenchShape({"rows": 2, "cols": 24}, "float32", quick=True))
    failing_first = {"n": 0}
    real = spec.implementations["triton"]

    def flaky(**kwargs):
        if kwargs["x"].shape[0] == 3:
            failing_first["n"] += 1
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real.load()(**kwargs)

    spec = dataclasses.replace(spec, implementations={"triton": flaky},
                               perf=dataclasses.replace(spec.perf, shapes=shapes))
    errors: list[str] = []
    records = runner.bench_spec(spec, _DEVICE, None, quick=True,
                                plan=runner.TimingPlan(repetitions=4, input_sets=1), errors=errors)
    assert failing_first["n"] >= 1
    assert errors == ["softmax {'rows': 3, 'cols': 40} float32: raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert {r["shape"]["rows"] for r in records} == {2, 1}, "the next shapes (and the launch shape) are still benchmarked"
    with pytest.raises(torch.OutOfMemoryError):  # without an errors list, the error propagates
        runner.bench_spec(spec, _DEVICE, None, quick=True, plan=runner.TimingPlan(repetitions=4, input_sets=1))


def _two_shapes(fn_for_rows):
    """softmax at two quick shapes, with a triton implementation chosen per row count."""
    spec = load_specs()["softmax"]
    shapes = (BenchShape({"rows": 3, "cols": 40}, "float32", quick=True),
              BenchShape({"rows": 2, "cols": 24}, "float32", quick=True))
    real = spec.implementations["triton"].load()
    impl = lambda **kw: fn_for_rows(kw["x"].shape[0], real, kw)  # noqa: E731
    return dataclasses.replace(spec, implementations={"triton": impl}, perf=dataclasses.replace(spec.perf, shapes=shapes))


def test_a_stuck_shape_is_stopped_at_its_time_limit_and_named(monkeypatch):
    """Only the stuck shape does any work, so the verdict cannot depend on the machine's load: a
    healthy shape that ran on the interpreter under 32 busy xdist workers once passed the limit too."""
    import time as time_

    def bench_shape(spec, shape, *args, **kwargs):
        if shape.dims["rows"] == 3:
            time_.sleep(30)
        return [{"shape": dict(shape.dims)}]

    monkeypatch.setattr(runner, "_bench_shape", bench_shape)
    errors: list[str] = []
    start = time_.monotonic()
    records = runner.bench_spec(_two_shapes(lambda rows, real, kw: real(**kw)), _DEVICE, None, quick=True,
                                errors=errors, shape_timeout_s=1.5)
    assert time_.monotonic() - start < 20
    (error,) = errors
    assert error.startswith("softmax {'rows': 3, 'cols': 40} float32: raised ShapeTimeout: ")
    assert "took longer than 1.5 s (stopped at test_bench_runner.py:" in error and "bench_shape" in error
    assert {r["shape"]["rows"] for r in records} == {2, 1}  # the next shape, and the launch-overhead one


def test_an_interrupt_ends_the_sweep_but_keeps_what_was_measured(fake_clock):
    def interrupted_on_2(rows, real, kw):
        if rows == 2:
            raise KeyboardInterrupt
        return real(**kw)

    spec = _two_shapes(interrupted_on_2)
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, shapes=spec.perf.shapes + spec.perf.shapes[1:]))
    errors, not_run = [], []
    with pytest.raises(runner.BenchInterrupted) as stop:
        runner.bench_spec(spec, _DEVICE, None, quick=True, plan=runner.TimingPlan(repetitions=4, input_sets=1),
                          errors=errors, not_run=not_run)
    assert {r["shape"]["rows"] for r in stop.value.records} == {3}
    assert errors == ["softmax {'rows': 2, 'cols': 24} float32: interrupted"]
    assert not_run == ["softmax {'rows': 2, 'cols': 24} float32", "softmax {'rows': 1, 'cols': 1} float32"]


@pytest.mark.parametrize("measured", [0, 1])
def test_an_interrupt_before_any_shape_records_no_baseline_and_keeps_the_run(monkeypatch, tmp_path, measured):
    """A sweep stopped before its first record (a step's time limit during compile warm-up) says
    why no baseline was recorded instead of failing the run; one record is recorded as usual."""
    import harness.nightly as nightly

    record = {"key": "softmax/forward/rows=2/float32/triton", "samples_ms": [1.0, 1.1, 0.9], "figure": "device"}

    def stopped(*args, **kwargs):
        raise runner.BenchInterrupted([record] * measured)

    monkeypatch.setattr(nightly, "bench_spec", stopped)
    monkeypatch.setattr(nightly, "measure", lambda index: None)
    monkeypatch.setattr(nightly, "judge", lambda *args: [])
    specs = {"softmax": load_specs()["softmax"]}
    out = nightly.benchmark_specs(specs, torch.device("cpu"), True, tmp_path, True, lambda line: None)
    assert out["bench_interrupted"] and len(out["benchmarks"]) == measured
    written = list(tmp_path.glob("*.json"))
    if measured:
        assert out["baseline_update_error"] is None and len(written) == 1
    else:
        assert out["baseline_update_error"] == "no benchmark was measured: no baseline recorded" and written == []


def test_the_compile_column_is_compiled_at_every_shape_past_dynamos_recompile_limit(monkeypatch):
    """dynamo keeps compiled entries per code object: without a reset per shape, the sixth shape
    (12 entries, past the limit of 8) would run eager under the "compile" name."""
    compiled_for = []

    def recording_backend(gm, example_inputs):
        compiled_for.append(tuple(next(t for t in example_inputs if isinstance(t, torch.Tensor)).shape))
        return gm.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(fn, backend=recording_backend, dynamic=False))
    monkeypatch.setattr(runner, "time_interleaved",
                        lambda calls, device, plan: {n: [c(0), 1.0][1:] * plan.repetitions for n, c in calls.items()})
    monkeypatch.setattr(runner, "time_wall",
                        lambda calls, device, batch, plan: {n: [c(0), 1.0][1:] * plan.wall_repetitions for n, c in calls.items()})
    spec = load_specs()["softmax"]
    shapes = tuple(BenchShape({"rows": 2, "cols": 8 + k}, "float32", quick=True) for k in range(6))
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, shapes=shapes))
    runner.bench_spec(spec, _DEVICE, None, quick=True, plan=runner.TimingPlan(repetitions=2, input_sets=1))
    assert {(2, 8 + k) for k in range(6)} <= set(compiled_for)


@pytest.mark.parametrize("name", sorted(n for n, s in load_specs().items() if s.perf is not None))
def test_every_launch_overhead_shape_is_a_call_the_reference_and_the_kernels_accept(name):
    """The derived tiny shape (every size at its least) must be a legal call; a spec whose scalars
    follow its sizes (a list per feature) names its own (``PerfModel.launch_shape``)."""
    from harness.checks import as_outputs, prepare

    spec = load_specs()[name]
    shape = runner.launch_shape(spec)
    assert shape is not None and all(v <= 64 for k, v in shape.dims.items() if k != "causal")
    case = runner.bench_case(spec, shape, seed=0)
    fns = {"reference": spec.reference, **{i: impl.load() for i, impl in spec.implementations.items()
                                           if skip_reason(spec, i, _DEVICE) is None}}
    for label, fn in fns.items():
        outputs = as_outputs(fn(**prepare(case, _DEVICE).kwargs()))
        assert outputs, label


def test_wall_time_divides_out_a_faster_host_that_the_device_figure_would_not_take_for_drift():
    """Another machine of the same kind ran every host-bound call 32-44% faster (H200, call 8 of
    benchmarks/results/2026-11-27-h200-14): the unchanged kernel must not read as improved."""
    base = [1.0 + 0.001 * (i % 7) for i in range(40)]
    baseline, records = {}, []
    for figure in ("device", "wall"):
        where = "" if figure == "device" else "wall/"
        for impl, now in (("triton", 0.52), ("eager", 0.68), ("compile", 0.56)):
            key = f"s/forward/n=1/float16/{where}{impl}"
            baseline[key] = {"samples_ms": base, "median_ms": 1.0}
            records.append({"key": key, "spec": "s", "implementation": impl, "figure": figure, "median_ms": now,
                            "samples_ms": [now * t for t in base]})
    device, wall = judge(records, baseline, None)
    assert device["verdict"] == "improvement" and "moved too far" in device["reason"]
    assert wall["verdict"] == "unchanged" and "drift divided out" in wall["reason"]
    slower = [dict(r, samples_ms=[2 * t for t in r["samples_ms"]]) if r["implementation"] == "triton" else r
              for r in records]
    assert judge(slower, baseline, None)[1]["verdict"] == "regression"  # a real host-side slowdown still shows


def _run_figure(figure, kernel_ms, reference_ms):
    """As ``_run``, for one figure (the wall figure's keys carry ``wall/``)."""
    where = "wall/" if figure == "wall" else ""
    records = [{"key": f"s/forward/n=1/float16/{where}{impl}", "spec": "s", "implementation": impl, "figure": figure,
                "median_ms": ms, "samples_ms": _timings(ms)}
               for impl, ms in (("triton", kernel_ms), *reference_ms.items())]
    baseline = {r["key"]: {"samples_ms": _timings(1.0), "median_ms": 1.0} for r in records}
    (v,) = judge(records, baseline, None)
    return v


# benchmarks/results/2026-11-29-h200-32 call 3: a slow host moved dropout-add-LayerNorm's per-call
# forward at 32768 x 512 +1.3% in eager (bound by the GPU) and +83.8% in torch.compile (bound by
# the host), too far apart to be one drift; the unchanged kernel (host-bound) moved +62.8%, and the
# gate called it a regression
_APART = {"eager": 1.013, "compile": 1.838}


@pytest.mark.parametrize("kernel_ms, reference_ms, verdict, divisor", [
    (1.628, _APART, "unchanged", None),  # between the references' moves: the host's
    (2.10, _APART, "unchanged", None),  # beyond the largest move, by less than the 25% minimum effect
    (2.40, _APART, "regression", 1.838),  # beyond the largest by 31%
    (0.75, _APART, "improvement", 1.0),  # 25% faster than where it was (a slower host cannot make it faster)
    (2.30, {"eager": 2.5, "compile": 2.2}, "unchanged", None),  # both moved too far to be drift; the kernel with them
    (1.00, {"eager": 2.5, "compile": 2.2}, "unchanged", None),  # a slower host leaves a GPU-bound call where it was
    (0.70, {"eager": 2.5, "compile": 2.2}, "improvement", 1.0),  # but cannot make one faster
    (1.00, {"eager": 0.45, "compile": 0.40}, "unchanged", None),  # a faster host, the kernel GPU-bound
    (1.30, {"eager": 0.45, "compile": 0.40}, "regression", 1.0),
    (1.00, {"eager": 2.5}, "unchanged", None),  # one reference, moved too far
    (0.35, {"eager": 0.45, "compile": 0.40}, "unchanged", None),  # faster with the host, a little past compile
    (0.30, {"eager": 0.45, "compile": 0.40}, "improvement", 0.40),  # 25% past the reference that moved most
])
def test_a_wall_line_whose_references_moved_apart_is_judged_against_their_moves(kernel_ms, reference_ms, verdict,
                                                                               divisor):
    v = _run_figure("wall", kernel_ms, reference_ms)
    assert v["verdict"] == verdict, v["reason"]
    assert v["drift"] == pytest.approx(divisor) if divisor is not None else v["drift"] is None
    assert ("within the references' moves" if divisor is None else "beyond the span of the references' moves") \
        in v["reason"]


def test_a_wall_line_with_too_few_samples_says_so_whatever_its_references_did():
    records = [{"key": f"s/forward/n=1/float16/wall/{impl}", "spec": "s", "implementation": impl, "figure": "wall",
                "median_ms": ms, "samples_ms": _timings(ms, n)} for impl, ms, n in (("triton", 2.0, 1), *(
                    (name, r, 40) for name, r in _APART.items()))]
    baseline = {r["key"]: {"samples_ms": _timings(1.0), "median_ms": 1.0} for r in records}
    (v,) = judge(records, baseline, None)
    assert v["verdict"] == "insufficient-data" and "moves" not in v["reason"], v["reason"]


def test_a_device_line_whose_references_moved_apart_is_still_judged_as_measured():
    """A GPU's clocks move its references alike; apart, one of them changed, not the machine."""
    v = _run_figure("device", 1.63, _APART)
    assert v["verdict"] == "regression" and v["drift"] is None and "judged as measured" in v["reason"]


def test_the_speedup_over_the_best_peer_pairs_the_timings_of_one_repetition(monkeypatch):
    # Host noise that moves every implementation of a repetition alike (here: every other
    # repetition twice as slow), ours 5% ahead, and each call's own 3% jitter: every figure of the
    # record is the median of each repetition's own ratio, 1.041 here, not the ratio of the
    # medians (1.050) nor that of the sides sorted apart (1.046), and reads "faster"; the sides
    # resampled apart keep the 2x swings in both and read a tie.
    import numpy as np

    from harness.regression import speedup

    rng = np.random.default_rng(0)
    swing = np.array([1.0 if k % 2 else 2.0 for k in range(30)])
    ours, peer = swing * rng.uniform(0.97, 1.03, 30), swing * 1.05 * rng.uniform(0.97, 1.03, 30)
    paired = float(np.median(peer / ours))
    assert abs(paired - np.median(peer) / np.median(ours)) > 0.005
    assert abs(paired - np.median(np.sort(peer) / np.sort(ours))) > 0.005

    def timed(calls_by_name, *_, **__):
        for call in calls_by_name.values():
            call(0)
        return {name: list(ours if name == "triton" else peer) for name in calls_by_name}

    monkeypatch.setattr(runner, "time_interleaved", timed)
    monkeypatch.setattr(runner, "time_wall", timed)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    spec = _small("softmax", {"rows": 4, "cols": 100}, "float16")
    records = runner.bench_spec(spec, _DEVICE, None, quick=True, plan=runner.TimingPlan(repetitions=30, input_sets=1))
    mine = [r for r in records if r["implementation"] == "triton"]
    assert mine
    for r in mine:
        assert r["vs_best_peer"] == "faster" and r["speedup_vs_best_peer"] == pytest.approx(paired)
        assert r["speedup_vs_eager"] == pytest.approx(paired) and r["speedup_vs_compile"] == pytest.approx(paired)
        assert r["speedup_vs_best_peer_ci"][0] > 1.0
    assert speedup(ours, peer)[3] == "tie"  # resampled apart: a tie


@pytest.mark.parametrize("pass_", ["forward", "forward_backward"])
def test_a_peer_that_writes_into_its_inputs_changes_nothing_another_implementation_reads(pass_):
    """Liger-Kernel's SwiGLU backward stores its gradients into its inputs: a third-party peer gets
    input sets of its own, so the implementations timed after it read the cases' values."""
    from harness.spec import OptionalPeer

    spec = _small("softmax", {"rows": 3, "cols": 40}, "float32")

    def scribbler(x):
        y = torch.softmax(x, -1)
        x.detach().fill_(7.0)
        return y

    peer = OptionalPeer("library", lambda: scribbler, "pip install library")
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, peers={"library": peer}))
    seen = []

    def recorder(x):
        seen.append(x.detach().clone())
        return torch.softmax(x, -1)

    shape = spec.perf.shapes[0]
    cases = [runner.bench_case(spec, shape, seed) for seed in range(2)]
    calls = runner.timed_calls(spec, {"triton": recorder, "library": scribbler, "eager": spec.reference}, cases,
                               _DEVICE, pass_)
    calls["triton"](0)
    with pytest.warns(runner.PeerWroteInputs, match=r"library wrote into its inputs \(input 'x': "):
        calls["library"](0)
    calls["library"](1)
    for i in (0, 1):
        calls["eager"](i)
    calls["triton"](0)
    calls["triton"](1)
    first, again, other = seen
    assert torch.equal(first, again) and not (again == 7.0).any() and not (other == 7.0).any()


def test_a_peer_that_writes_into_its_inputs_is_named_on_its_first_call():
    """The first call's warnings (kept in the records and shown in the reports) name the tensors a
    third-party peer wrote into; a peer that writes nothing, and our implementation, get none."""
    from harness.spec import OptionalPeer

    spec = _small("softmax", {"rows": 3, "cols": 40}, "float32")

    def scribbler(x):
        y = torch.softmax(x, -1)
        x.detach()[0, 0] = float("nan")
        return y

    peers = {"library": OptionalPeer("library", lambda: scribbler, "pip install library"),
             "tidy": OptionalPeer("tidy", lambda: (lambda x: torch.softmax(x, -1)), "pip install tidy")}
    spec = dataclasses.replace(spec, perf=dataclasses.replace(spec.perf, peers=peers))
    shape = spec.perf.shapes[0]
    cases = [runner.bench_case(spec, shape, seed) for seed in range(2)]
    fns = {"triton": spec.implementations["triton"].load(), "library": scribbler, "tidy": peers["tidy"].load(),
           "eager": spec.reference}
    warned = runner._first_call_warnings(runner.timed_calls(spec, fns, cases, _DEVICE, "forward"))
    (message,) = warned["library"]
    assert message.startswith("PeerWroteInputs: library wrote into its inputs (input 'x': ")
    assert warned["tidy"] == [] and warned["triton"] == [] and warned["eager"] == []
