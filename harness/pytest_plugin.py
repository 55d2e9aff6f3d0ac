"""The harness's pytest plugin: one test per spec x implementation x dtype x check.

Installing the harness installs the plugin (entry point ``pytest11``); it stays idle unless the
run is about kernels: ``--kernels`` is given, the project names its specs (``[tool.harness]`` in
its pyproject.toml, or a harness.toml: ``harness.project``), or ``HARNESS_SPECS`` is set. Then it
picks the backend (GPU, or the Triton interpreter when there is none) before any kernel is
imported, loads the Hypothesis profile, and adds the kernel tests (``harness/kernel_tests.py``)
to the run, so that a project needs no test file of its own:

* ``pytest -n auto``: the project's tests and every kernel's;
* ``pytest -n auto --kernels softmax,rms_norm``: those kernels' tests alone;
* with paths on the command line the plugin adds nothing (name ``harness/kernel_tests.py``
  yourself, or pass ``--pyargs harness.kernel_tests``).

Any test that asks for the ``harness_run`` fixture argument is parametrised over the selected
specs. Under xdist each worker pins one GPU (``gwN`` -> GPU ``N mod count``), and the terminal
summary shows how the tests spread over the devices.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

KERNEL_TESTS = Path(__file__).with_name("kernel_tests.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "kernel verification harness")
    group.addoption("--kernels", default="", help="comma-separated spec names to verify (default: all)")
    group.addoption("--implementations", default="", help="comma-separated implementation names (default: all)")
    group.addoption("--dtypes", default="", help="comma-separated dtypes (default: each spec's own)")
    group.addoption("--harness-seed", type=int, default=None,
                    help="draw cases from this seed instead of the ci profile's fixed ones (also HARNESS_SEED)")
    group.addoption("--launch-coverage", action="store_true",
                    help="with --cov under the interpreter: measure only inside kernel launches, the first "
                         "distinct launches of each specialisation (what `harness branches` reads, at a "
                         "fraction of --cov's cost; harness/launch_coverage.py)")


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _active(config: pytest.Config) -> bool:
    """Whether this run is about kernels (module docstring): never an error in a project that is
    not, whatever its pyproject.toml holds."""
    from harness.project import ProjectError, find_project

    if config.getoption("--kernels") or os.environ.get("HARNESS_SPECS"):
        return True
    if any(Path(arg.split("::")[0]).resolve() == KERNEL_TESTS for arg in config.args):
        return True  # the kernel tests named on the command line
    try:
        return find_project(config.rootpath) is not None
    except ProjectError:
        return False  # not this plugin's file to judge; a run about kernels reports it when it loads specs


def _add_kernel_tests(config: pytest.Config) -> None:
    """Put the kernel tests in the run where no path was named: beside the project's tests (its
    ``testpaths``), or, with ``--kernels``, alone."""
    if config.args_source == pytest.Config.ArgsSource.ARGS or str(KERNEL_TESTS) in config.args:
        return
    if config.getoption("--kernels"):
        config.args[:] = [str(KERNEL_TESTS)]
    else:
        config.args.append(str(KERNEL_TESTS))


def _inflight_files(config: pytest.Config) -> None:
    """An xdist worker writes the case it is about to run to a file of its own, so that a worker
    killed by a kernel (host memory corrupted, a segfault) is still reported with its case and a
    repro (``pytest_handlecrashitem``)."""
    # config.workerinput exists in an xdist worker process alone (the environment variables xdist
    # sets are inherited by a pytest a test starts, which must not write into this worker's file)
    workerinput = getattr(config, "workerinput", None) or {}
    worker, run = workerinput.get("workerid"), workerinput.get("testrunuid")
    if worker and run:
        from harness.repro import set_inflight, xdist_inflight_path

        path = xdist_inflight_path(run, worker)
        path.parent.mkdir(parents=True, exist_ok=True)
        set_inflight(path)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report, sched) -> None:
    """xdist's controller, when a worker died running ``crashitem``: add the case it was running."""
    node = getattr(report, "node", None)
    workerinput = getattr(node, "workerinput", None) or {}
    if "testrunuid" not in workerinput or "workerid" not in workerinput:
        return
    from harness.repro import crash_report, xdist_inflight_path

    path = xdist_inflight_path(workerinput["testrunuid"], workerinput["workerid"])
    if path.exists():
        about, _ = crash_report(path)
        report.longrepr = f"{report.longrepr}; {about}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kernel(name): a generated verification test of one kernel spec")
    config.addinivalue_line("markers", "perf: a performance test (GPU only, exclusive per GPU)")
    config._harness_active = _active(config)  # type: ignore[attr-defined]
    if config.getoption("--launch-coverage") and not getattr(config.option, "cov_source", None):
        raise pytest.UsageError("--launch-coverage measures with pytest-cov's coverage: add --cov")
    if not config._harness_active:  # type: ignore[attr-defined]
        return
    from harness import profiles
    from harness.device import ContextWatch, configure_backend, select_device, share_cpu

    configure_backend()
    profiles.load(os.environ.get("HARNESS_PROFILE"))
    _add_kernel_tests(config)
    _inflight_files(config)
    config._harness_device = select_device(os.environ.get("PYTEST_XDIST_WORKER"))  # type: ignore[attr-defined]
    # processes side by side: xdist's workers, or HARNESS_PROCESSES (gpu_run.sh verify-shards)
    share_cpu(int(os.environ.get("HARNESS_PROCESSES") or os.environ.get("PYTEST_XDIST_WORKER_COUNT") or "1"))
    config._harness_watch = ContextWatch()  # type: ignore[attr-defined]
    seed = config.getoption("--harness-seed")
    config._harness_seed = seed if seed is not None else profiles.seed_from_env()  # type: ignore[attr-defined]


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not config._harness_active:  # type: ignore[attr-defined]
        return []
    from hypothesis import settings

    from harness.device import describe

    profile = settings._current_profile  # noqa: SLF001 - the only way to read the active profile's name
    return [f"harness: device {describe(config._harness_device)}, hypothesis profile {profile!r}"]  # type: ignore[attr-defined]


def _perf_params(config: pytest.Config, specs) -> list:
    device = config._harness_device  # type: ignore[attr-defined]
    params = []
    for spec in specs.values():
        if spec.perf is None:
            continue
        marks = [pytest.mark.kernel(spec.name), pytest.mark.perf]
        if device.type != "cuda":
            marks.append(pytest.mark.skip(reason="performance is measured on a GPU only; this run uses the Triton interpreter"))
        elif "perf" not in (config.getoption("-m") or ""):
            marks.append(pytest.mark.skip(reason="performance tests run only when selected with -m perf"))
        params.append(pytest.param(spec, id=f"{spec.name}-perf", marks=marks))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if not config._harness_active:  # type: ignore[attr-defined]
        return
    from harness.registry import load_specs, select
    from harness.runner import property_runs, skip_reason

    if "harness_perf_spec" in metafunc.fixturenames:
        specs = select(load_specs(), _csv(config.getoption("--kernels")))
        metafunc.parametrize("harness_perf_spec", _perf_params(config, specs))
    if "harness_run" not in metafunc.fixturenames:
        return
    device = config._harness_device  # type: ignore[attr-defined]
    specs = select(load_specs(), _csv(config.getoption("--kernels")))
    params = []
    for spec in specs.values():
        runs = property_runs(
            spec, device,
            implementations=_csv(config.getoption("--implementations")) or None,
            dtypes=_csv(config.getoption("--dtypes")) or None,
        )
        for run in runs:
            marks = [pytest.mark.kernel(spec.name)]
            reason = skip_reason(spec, run.implementation, device, run.check)
            if reason:
                marks.append(pytest.mark.skip(reason=reason))
            known = spec.known_failure(run.implementation, run.dtype, run.check)
            if known:
                marks.append(pytest.mark.xfail(reason=known.reason, strict=True, raises=pytest.fail.Exception))
            params.append(pytest.param(run, id=run.test_id, marks=marks))
    metafunc.parametrize("harness_run", params)


@pytest.fixture
def harness_seed(request: pytest.FixtureRequest) -> int | None:
    return request.config._harness_seed  # type: ignore[attr-defined]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Verification shares its GPU with other workers; a perf test holds it alone (see gpu_lock)."""
    if not item.config._harness_active:  # type: ignore[attr-defined]
        return (yield)
    from harness.gpu_lock import gpu_lock

    exclusive = item.get_closest_marker("perf") is not None
    device = item.config._harness_device  # type: ignore[attr-defined]
    watch = item.config._harness_watch  # type: ignore[attr-defined]
    with gpu_lock(device, exclusive=exclusive):
        try:
            result = yield
        except BaseException:
            watch.after(item.nodeid, device)
            raise
        if watch.after(item.nodeid, device):  # the test passed without noticing: it did not sync
            pytest.fail(f"the CUDA context was lost during this test: {watch.lost[1]}", pytrace=False)
        return result


def _start_launch_coverage(config: pytest.Config) -> None:
    """--launch-coverage: from the first test on, coverage runs only in new interpreted launches."""
    if getattr(config, "_harness_launch_coverage", None) is not None:
        return
    from harness.validate import interpreting

    if not interpreting():
        config._harness_launch_coverage = False  # type: ignore[attr-defined]
        return  # compiled kernels run no Python lines to measure
    import coverage

    from harness import launch_coverage

    # An xdist worker holds two started coverage instances, one paused under pytest-cov's (seen with
    # pytest-cov 7.1, coverage 7.17): stopping the top one resumes the one under it, so every one
    # is stopped, and the first resumes in launches
    running = []
    while (cov := coverage.Coverage.current()) is not None and cov not in running:
        cov.stop()
        running.append(cov)
    if not running:  # pytest_configure checked for --cov; a plugin stopped it since
        pytest.fail("--launch-coverage: no coverage is running in this process", pytrace=False)
    config._harness_launch_coverage = launch_coverage.install(running[0])  # type: ignore[attr-defined]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not item.config._harness_active:  # type: ignore[attr-defined]
        return
    if item.config.getoption("--launch-coverage"):
        _start_launch_coverage(item.config)
    from harness.device import describe

    refusal = item.config._harness_watch.refusal()  # type: ignore[attr-defined]
    if refusal is not None:
        pytest.fail(refusal, pytrace=False)
    if "harness_run" not in getattr(item, "fixturenames", ()):
        return
    item.user_properties.append(("harness_worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))
    item.user_properties.append(("harness_device", describe(item.config._harness_device)))  # type: ignore[attr-defined]


def verify(run, seed: int | None) -> None:
    """Run one property (a ``harness.runner.PropertyRun``) inside a test; a failure becomes a
    pytest failure carrying the full report (shrunk case, error statistics, repro command) instead
    of a traceback through the harness."""
    from harness.runner import CheckFailure

    try:
        run.run(force_seed=seed)
    except CheckFailure as failure:
        report = str(failure)
    else:
        return
    pytest.fail(report, pytrace=False)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    spread: Counter[tuple[str, str]] = Counter()
    noted: list[str] = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            props = dict(getattr(report, "user_properties", ()) or ())
            if getattr(report, "when", None) == "call" and "harness_device" in props:
                spread[(props["harness_device"], props["harness_worker"])] += 1
            if getattr(report, "when", None) == "call" and "harness_note" in props:
                noted.append(props["harness_note"])
    if noted:  # passed, beyond eager's own error: graded verdicts (harness.results.numerics_note)
        terminalreporter.section("harness numerics notes")
        terminalreporter.write_line("passed, with a numerics score above 1 (beyond eager's own error, within the budget):")
        for line in sorted(noted):
            terminalreporter.write_line(f"  {line}")
    if not spread:
        return
    terminalreporter.section("harness devices")
    by_device: dict[str, list[str]] = {}
    for (device, worker), count in sorted(spread.items()):
        by_device.setdefault(device, []).append(f"{worker}: {count} tests")
    for device, workers in by_device.items():
        terminalreporter.write_line(f"{device}: {', '.join(workers)}")
