"""Device pinning under xdist, and atomic writes."""

import os

import pytest
import torch

from harness import device
from harness.io import atomic_write_text


@pytest.mark.parametrize("worker, index", [(None, 0), ("gw0", 0), ("gw5", 5), ("master", 0)])
def test_worker_index(worker, index):
    assert device.worker_index(worker) == index


def test_workers_spread_round_robin_over_visible_gpus(monkeypatch):
    pinned = []
    monkeypatch.setattr(device, "_selected", None)  # first, so that the undo restores this process's own choice
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", pinned.append)
    monkeypatch.setattr(device, "configure_backend", lambda: None)
    chosen = [device.select_device(f"gw{i}") for i in range(4)]
    assert [d.index for d in chosen] == [0, 1, 0, 1] and pinned == [0, 1, 0, 1]


def test_side_by_side_processes_share_the_cores_for_host_threads(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    before = torch.get_num_threads()
    try:
        assert device.share_cpu(4) == 4 and torch.get_num_threads() == 4
        assert device.share_cpu(64) == 1 and torch.get_num_threads() == 1
        torch.set_num_threads(3)
        assert device.share_cpu(1) == 3  # one process keeps torch's own count
    finally:
        torch.set_num_threads(before)


def test_atomic_write_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "sub" / "results.json"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert os.listdir(target.parent) == ["results.json"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "baseline.json"
    atomic_write_text(target, "recorded")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "recorded"
    assert os.listdir(tmp_path) == ["baseline.json"]


def test_a_lost_cuda_context_refuses_later_tests_and_names_where_it_was_lost():
    from harness.device import ContextWatch

    errors = iter([None, "AcceleratorError: CUDA error: an illegal memory access was encountered", None])
    watch = ContextWatch(probe=lambda device: next(errors))
    assert not watch.after("tests/x.py::test_fine", torch.device("cuda", 0))
    assert watch.refusal() is None
    assert watch.after("tests/x.py::test_bad", torch.device("cuda", 0)), "the test where it was lost is told"
    message = watch.refusal()
    assert "tests/x.py::test_bad" in message and "illegal memory access" in message and "not run" in message
    assert not watch.after("tests/x.py::test_later", torch.device("cuda", 0))  # the first loss is the one named
    assert "test_bad" in watch.refusal()


def test_the_context_probe_is_silent_off_the_gpu():
    from harness.device import lost_context

    assert lost_context(torch.device("cpu")) is None


def test_a_crash_is_reported_with_the_causes_behind_it():
    from harness.errors import describe_exception

    try:
        try:
            raise AssertionError("fp64 operands are not supported here")
        except AssertionError as inner:
            raise RuntimeError("at 16:15: gram = dot(z, z_t, gram)") from inner
    except RuntimeError as outer:
        text, brief = describe_exception(outer), describe_exception(outer, brief=True)
    assert text.splitlines() == ["raised RuntimeError: at 16:15: gram = dot(z, z_t, gram)",
                                 "caused by AssertionError: fp64 operands are not supported here"]
    assert brief == ("raised RuntimeError: at 16:15: gram = dot(z, z_t, gram); "
                                                     "caused by AssertionError: fp64 operands are not supported here")
    try:
        raise ValueError("alone")
    except ValueError as single:
        assert describe_exception(single) == "raised ValueError: alone"


def test_a_property_on_a_gpu_hands_its_cached_memory_back_and_on_the_cpu_touches_nothing(monkeypatch):
    import torch

    from harness.runner import release_cached_memory

    calls = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty"))
    release_cached_memory(torch.device("cpu"))
    assert calls == []
    release_cached_memory(torch.device("cuda", 0))
    assert calls == ["empty"]
