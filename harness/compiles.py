"""Counting Triton compilations, so a report can say what verification cost in compiled variants.

Triton calls ``knobs.runtime.jit_post_compile_hook`` once per kernel variant it compiles (or loads
from its disk cache) into a process. Under the interpreter nothing is compiled and the count is None.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator


@contextlib.contextmanager
def count_compilations() -> Iterator[Counter]:
    """Yield a Counter of compiled variants per kernel name, filled while the block runs."""
    counts: Counter = Counter()
    try:
        from triton import knobs
    except ImportError:  # older Triton without knobs: nothing to count
        yield counts
        return
    previous = knobs.runtime.jit_post_compile_hook

    def hook(*args, **kwargs):
        fn = kwargs.get("fn")
        counts[getattr(fn, "name", "kernel")] += 1
        return previous(*args, **kwargs) if previous else None

    knobs.runtime.jit_post_compile_hook = hook
    try:
        yield counts
    finally:
        knobs.runtime.jit_post_compile_hook = previous
