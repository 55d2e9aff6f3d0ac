"""Interpreted launches run from a frame-stack chunk of their own.

CPython 3.11 and 3.12 keep the frames of Python calls on a per-thread stack of 16 KiB chunks, map
a new chunk when a call does not fit in the current one, and unmap it as soon as the frame at its
start returns (cpython gh-142183; later 3.13 and 3.14 releases keep one chunk cached). Under Triton's interpreter a launch calls the interpreter's ops hundreds of thousands of
times at the same few depths; where one of those depths falls on a chunk's end, every such call
maps a chunk and every return unmaps it. Which depth falls there depends on how deep the launch
was called from: flash_attention's backward test made 513,000 munmaps (9.1 s) in an xdist worker,
and 1,481,000 (20.2 s) once ``--launch-coverage``'s wrapper added three frames under each launch
(``perf stat``; the launches were not traced more, the stack was three frames deeper).

``run_in_own_chunk`` calls through a frame too large for any chunk's remainder, so CPython maps a
chunk for it alone, and the launch's frames live after it in the same chunk, whatever the depth
it was called from: the test made 26,000 munmaps, and took 4.4 s (6.5 s with --launch-coverage).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# CPython's chunk is 16 KiB (2,048 slots of 8 bytes); a frame that does not fit gets a chunk of
# 16 KiB doubled until it holds the frame and 1,000 slots more. A frame of 3,200 local slots fits
# in no 16 KiB chunk, and gets a 64 KiB one with about 4,900 slots (38 KiB) after it: room for an
# interpreted launch's deepest frames (a 128 KiB chunk measured the same).
FRAME_SLOTS = 3200


def _runner() -> Callable[..., Any]:
    """``run_in_own_chunk``, whose frame has ``FRAME_SLOTS`` locals: they are never assigned, and
    only make the frame that large (the compiler counts every name a function assigns)."""
    names = " = ".join(f"_{i}" for i in range(FRAME_SLOTS))
    source = (
        "def run_in_own_chunk(call, /, *args, **kwargs):\n"
        "    if call is None:\n"
        f"        {names} = None\n"
        "    return call(*args, **kwargs)\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<harness.frame_chunks>", "exec"), namespace)  # noqa: S102 - generated above, no input
    return namespace["run_in_own_chunk"]


run_in_own_chunk: Callable[..., Any] = _runner()
run_in_own_chunk.__doc__ = "``call(*args, **kwargs)``, its frames in a frame-stack chunk of their own (module docstring)."


def install() -> None:
    """Run every interpreted launch (``GridExecutor.__call__``, Triton 3.6-3.8) through
    ``run_in_own_chunk``; once per process, however often it is called."""
    from triton.runtime import interpreter

    launch = interpreter.GridExecutor.__call__
    if getattr(launch, "_harness_own_chunk", False):
        return

    @functools.wraps(launch)
    def in_own_chunk(self, *args, **kwargs):
        return run_in_own_chunk(launch, self, *args, **kwargs)

    in_own_chunk._harness_own_chunk = True  # type: ignore[attr-defined]
    interpreter.GridExecutor.__call__ = in_own_chunk
