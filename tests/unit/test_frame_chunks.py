"""harness.frame_chunks: a call through run_in_own_chunk maps no frame-stack chunk per inner call, at any depth."""

import resource
import sys

import pytest

from harness import frame_chunks
from harness.validate import interpreting


def _leaf():
    return None


def _calls(n):
    for _ in range(n):
        _leaf()


def _at_depth(depth, fn):
    return fn() if depth == 0 else _at_depth(depth - 1, fn)


def _worst_page_faults(hot) -> int:
    """The most minor page faults that 2,000 calls of a small function made, over the depths that
    span more than a 16 KiB chunk: where the calls fall on a chunk's end, CPython 3.11 maps (and
    touches) a fresh chunk for each one."""
    worst = 0
    for depth in range(300):  # frames of _at_depth are ~100 bytes: 300 of them span two chunks
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        _at_depth(depth, hot)
        worst = max(worst, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return worst


def test_calls_in_their_own_chunk_map_no_chunk_per_call_at_any_depth():
    if sys.version_info < (3, 13):  # the CPython this guards against: some depth maps a chunk per call
        assert _worst_page_faults(lambda: _calls(2000)) >= 2000
    assert _worst_page_faults(lambda: frame_chunks.run_in_own_chunk(_calls, 2000)) < 500


def test_arguments_results_and_exceptions_pass_through():
    assert frame_chunks.run_in_own_chunk(lambda a, b=0, *, c: (a, b, c), 1, c=3) == (1, 0, 3)
    with pytest.raises(ZeroDivisionError):
        frame_chunks.run_in_own_chunk(lambda: 1 / 0)


@pytest.mark.skipif(not interpreting(), reason="wraps the interpreter's launches; a GPU runs compiled kernels")
def test_interpreted_launches_run_in_their_own_chunk_once_installed(monkeypatch):
    from triton.runtime import interpreter

    callers = []

    def launch(self, *args, **kwargs):
        callers.append(sys._getframe(1).f_code.co_name)  # the frame that called the launch

    monkeypatch.setattr(interpreter.GridExecutor, "__call__", launch)  # undone after
    frame_chunks.install()
    frame_chunks.install()  # a second install wraps nothing more
    interpreter.GridExecutor.__call__(None)
    assert callers == ["run_in_own_chunk"]
    assert interpreter.GridExecutor.__call__.__wrapped__ is launch
