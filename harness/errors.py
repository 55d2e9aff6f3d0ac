"""How a crash on a case is worded in a report: the exception and the chain of causes behind it.

Triton wraps a compiler failure in ``CompilationError``, whose own message is only the kernel source
around the failing line; the reason (an unsupported dtype, an operand shape) is its ``__cause__``.
A report that keeps only the outer message shows where the compiler stopped but not why (an H100
run of an fp64 ``tl.dot`` said only "raised CompilationError: at 16:15: <source>").
"""

from __future__ import annotations

_MAX_CAUSES = 4


def describe_exception(exc: BaseException) -> str:
    """``raised Type: message``, then ``caused by Type: message`` for each chained cause."""
    parts = [f"raised {type(exc).__name__}: {exc}"]
    seen = {id(exc)}
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while cause is not None and id(cause) not in seen and len(parts) <= _MAX_CAUSES:
        seen.add(id(cause))
        parts.append(f"caused by {type(cause).__name__}: {cause}")
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    return "\n".join(parts)
