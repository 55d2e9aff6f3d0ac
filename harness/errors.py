"""How a crash on a case is worded in a report: the exception and the chain of causes behind it.

Triton wraps a compiler failure in ``CompilationError``, whose own message is only the kernel source
around the failing line; the reason (an unsupported dtype, an operand shape) is its ``__cause__``.
A report that keeps only the outer message shows where the compiler stopped but not why (an H100
run of an fp64 ``tl.dot`` said only "raised CompilationError: at 16:15: <source>").
"""

from __future__ import annotations

_MAX_CAUSES = 4


def describe_exception(exc: BaseException, brief: bool = False) -> str:
    """``raised Type: message``, then ``caused by Type: message`` for each chained cause; with
    ``brief``, one line: each message cut to its first line, the causes joined with "; "."""
    parts = [f"raised {type(exc).__name__}: {_message(exc, brief)}"]
    seen = {id(exc)}
    cause = _cause(exc)
    while cause is not None and id(cause) not in seen and len(parts) <= _MAX_CAUSES:
        seen.add(id(cause))
        parts.append(f"caused by {type(cause).__name__}: {_message(cause, brief)}")
        cause = _cause(cause)
    return ("; " if brief else "\n").join(parts)


def _cause(exc: BaseException) -> BaseException | None:
    return exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


def _message(exc: BaseException, brief: bool) -> str:
    text = str(exc)
    return text.strip().splitlines()[0] if brief and text.strip() else text
