"""The GPU tuning a kernel module plans its launches from, as data that a sweep passes in.

A module keeps its measured choices (tile limits, programs per SM, switches) in one ``Tuning``:
named entries, read each time a launch is planned. A tuning sweep (``benchmarks/tune_rows.py``)
times a candidate with ``TUNING.replaced(entry=value, ...)`` around the calls, and every plan built
from other values is forgotten on the way in and on the way out. Nothing else changes a module's
tuning: it is never rebound from outside.

The current values are the module's, not a thread's: autograd runs a backward on its own device
thread, which must plan with the candidate the sweep passed in as the forward did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any

from kernels import _launch


class Tuning:
    """Named tuning entries of one kernel module (``TUNING.forward``), with their measured values
    as defaults. ``forget`` are the module's own caches of what it derived from them (an
    ``functools.lru_cache``'s ``cache_clear``), emptied with the ops' plan tables on every change."""

    def __init__(self, name: str, forget: tuple[Callable[[], None], ...] = (), **entries: Any):
        self._name = name
        self._forget = list(forget)
        self._defaults = MappingProxyType(dict(entries))
        self._values = self._defaults

    def __getattr__(self, entry: str) -> Any:
        values = self.__dict__.get("_values", {})
        if entry in values:
            return values[entry]
        raise AttributeError(f"{self.__dict__.get('_name', '?')} tuning has no entry {entry!r}; "
                             f"its entries: {sorted(values)}")

    @property
    def defaults(self) -> MappingProxyType:
        """The measured values, whatever a sweep has passed in."""
        return self._defaults

    def forget_with(self, forget: Callable[[], None]) -> Callable[[], None]:
        """Also empty this cache on every change (usable as a decorator of the clear function)."""
        self._forget.append(forget)
        return forget

    @contextlib.contextmanager
    def replaced(self, **entries: Any) -> Iterator[Tuning]:
        """These entries take these values until the with-block ends (nested blocks stack)."""
        unknown = sorted(set(entries) - set(self._defaults))
        if unknown:
            raise ValueError(f"{self._name} tuning has no entries {unknown}; its entries: {sorted(self._defaults)}")
        before = self._values
        self._values = MappingProxyType({**before, **entries})
        self._changed()
        try:
            yield self
        finally:
            self._values = before
            self._changed()

    def _changed(self) -> None:
        for forget in self._forget:
            forget()
        _launch.forget_plans()

    def __repr__(self) -> str:
        changed = {k: v for k, v in self._values.items() if self._defaults[k] is not v}
        return f"Tuning({self._name!r}, {dict(self._values)!r}" + (f", replaced: {sorted(changed)})" if changed else ")")
