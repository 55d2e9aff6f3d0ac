"""Verification in worker processes (harness.parallel): outcomes, costs and the time budget."""

import time
from pathlib import Path

import pytest

from harness.parallel import RunKey, run_tasks, verify_parallel
from kernels._runtime import interpreting

HERE = Path(__file__).resolve().parent


@pytest.fixture
def parallel_specs(monkeypatch):
    monkeypatch.setenv("HARNESS_SPECS", "parallel_specs")
    monkeypatch.syspath_prepend(str(HERE))  # spawned workers start from the parent's sys.path


def test_outcomes_come_back_in_order_with_costs(parallel_specs):
    keys = [RunKey("par_good", "torch", "float32", "forward", 3), RunKey("par_wrong", "torch", "float32", "forward", 3),
            RunKey("par_good", "torch", "float32", "unwritten", 3)]
    outcomes, cost = verify_parallel(keys, jobs=2, profile="ci")
    assert [(o.spec, o.check) for o in outcomes] == [(k.spec, k.check) for k in keys]
    assert [o.status for o in outcomes] == ["passed", "failed", "passed"]
    assert "par_wrong[torch] forward" in outcomes[1].message and "OVER budget" in outcomes[1].message
    assert outcomes[0].examples >= 1 and outcomes[0].worst_score is not None
    assert set(cost) == {"par_good", "par_wrong"}
    # the interpreter compiles nothing and counts nothing; on a GPU the torch "kernels" compile none
    assert cost["par_good"]["compilations"] == (None if interpreting() else 0)


def test_a_time_budget_reports_unfinished_checks_as_skipped(parallel_specs):
    # 30 s: a spawned worker starting torch (and CUDA, on a GPU runner whose other pytest workers
    # load the machine) took longer than 15 s there; the slow check needs 100 s
    keys = [RunKey("par_good", "torch", "float32", "forward", 1), RunKey("par_slow", "torch", "float32", "forward", 20)]
    start = time.monotonic()
    outcomes, _ = verify_parallel(keys, jobs=2, profile="ci", deadline_s=30)
    assert time.monotonic() - start < 90, "the budget must stop the slow check, not wait for it"
    assert outcomes[0].status == "passed"
    assert outcomes[1].status == "skipped" and "time budget of 30 s ran out" in outcomes[1].message


def test_a_budget_stop_lets_a_worker_release_its_locks(parallel_specs, monkeypatch, tmp_path):
    """Stopped workers unwind (SIGTERM first): a lock file held inside a kernel call is removed by
    its ``finally``. A SIGKILL would leave it, and every later process would wait on it forever,
    as a nightly run's benchmarks did on the H100 behind a killed worker's CUDA extension build."""
    lock = tmp_path / "lock"
    monkeypatch.setenv("PAR_LOCK_PATH", str(lock))
    keys = [RunKey("par_locked", "torch", "float32", "forward", 1)]
    outcomes, _ = verify_parallel(keys, jobs=1, profile="ci", deadline_s=10)
    assert outcomes[0].status == "skipped"
    assert not lock.exists(), "the stopped worker left its lock file behind"


def test_a_check_stopped_by_the_budget_is_never_reported_as_failed(parallel_specs):
    """Code that turns the stop's interrupt into an ordinary error (an import inside the check
    reporting "initialization failed") must not make the check a failure."""
    keys = [RunKey("par_masks", "torch", "float32", "forward", 1)]
    outcomes, _ = verify_parallel(keys, jobs=1, profile="ci", deadline_s=10)
    assert outcomes[0].status == "skipped", outcomes[0].message


def test_a_worker_that_dies_fails_its_check_and_is_replaced(parallel_specs):
    keys = [RunKey("par_dies", "torch", "float32", "forward", 1), RunKey("par_good", "torch", "float32", "forward", 1),
            RunKey("par_good", "torch", "float32", "unwritten", 1)]
    outcomes, _ = verify_parallel(keys, jobs=1, profile="ci")
    died = outcomes[0]
    assert died.status == "failed" and "died (exit code 3)" in died.message
    # the case it was running was written before it ran: named, with a repro, though the process is gone
    assert "it was running par_dies[torch] forward on this case:" in died.message, died.message
    assert "harness repro '{" in died.message and "--implementation torch --check forward" in died.message
    assert died.repro and Path(died.repro).is_file()
    assert [o.status for o in outcomes[1:]] == ["passed", "passed"]


def test_an_xdist_worker_that_dies_is_reported_with_the_case_it_was_running(parallel_specs, tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HARNESS_SPECS": "parallel_specs",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent.parent)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", "--kernels",
                           "par_dies", "-k", "forward"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0
    assert "crashed while running" in done.stdout and "it was running par_dies[torch] forward on this case" in done.stdout, \
        done.stdout[-3000:]


def test_jobs_must_be_positive():
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        verify_parallel([], jobs=0, profile="ci")


def test_a_worker_error_is_a_failure_of_that_check_only(parallel_specs):
    keys = [RunKey("no_such_spec", "torch", "float32", "forward", 1), RunKey("par_good", "torch", "float32", "forward", 1)]
    outcomes, _ = verify_parallel(keys, jobs=1, profile="ci")
    assert outcomes[0].status == "failed" and "not registered" in outcomes[0].message
    assert outcomes[1].status == "passed"


def test_run_tasks_returns_results_by_position_and_a_raising_task_as_crashed(parallel_specs):
    from parallel_specs import EchoTask

    seen = []
    results = run_tasks([EchoTask(1), EchoTask(-2), EchoTask(3)], jobs=2, on_done=lambda i, r: seen.append(i))
    assert results == {0: 10, 1: "crashed: raised ValueError: negative: -2", 2: 30}
    assert sorted(seen) == [0, 1, 2]
