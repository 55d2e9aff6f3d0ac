"""The GPU tuning a kernel module plans its launches from, as data that a sweep passes in.

A module keeps its measured choices (tile limits, programs per SM, switches) in one ``Tuning``:
named entries, read each time a launch is planned. A tuning sweep (``benchmarks/tune_rows.py``)
times a candidate with ``TUNING.replaced(entry=value, ...)`` around the calls, and every plan built
from other values is forgotten on the way in and on the way out. Nothing else changes a module's
tuning: it is never rebound from outside.

The current values are the module's, not a thread's: autograd runs a backward on its own device
thread, which must plan with the candidate the sweep passed in as the forward did.

A GPU model on which an entry measured otherwise has its own value (``devices``): the measured
values are the entries given, with those measured for the model of the GPU this process runs on
over them, found by name (``"H200"`` in ``torch.cuda.get_device_name()``) the first time an entry
is read. The choice is per process: a host's GPUs are taken to be one model (on a mixed host the
first GPU's values hold for all, which costs speed, never correctness: an entry only chooses
among correct launches). Under the interpreter, and without a GPU, the entries given hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import torch

from harness.validate import interpreting
from kernels import _launch


def gpu_name() -> str | None:
    """The model name of the GPU this process runs kernels on, or None (no GPU, or the interpreter)."""
    if interpreting() or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name()


class Tuning:
    """Named tuning entries of one kernel module (``TUNING.forward``), with their measured values
    as defaults. ``forget`` are the module's own caches of what it derived from them (an
    ``functools.lru_cache``'s ``cache_clear``), emptied with the ops' plan tables on every change.
    ``devices`` maps a GPU model's name (a part of ``torch.cuda.get_device_name()``) to the entries
    measured otherwise on it (module docstring)."""

    def __init__(self, name: str, forget: tuple[Callable[[], None], ...] = (),
                 devices: Mapping[str, Mapping[str, Any]] | None = None, **entries: Any):
        self._name = name
        self._forget = list(forget)
        self._given = MappingProxyType(dict(entries))
        for model, measured in (devices or {}).items():
            unknown = sorted(set(measured) - set(entries))
            if unknown:
                raise ValueError(f"{name} tuning's entries for {model!r} name entries it does not have: {unknown}; "
                                 f"its entries: {sorted(entries)}")
        self._devices = {model: MappingProxyType(dict(measured)) for model, measured in (devices or {}).items()}
        self._measured: MappingProxyType | None = None  # found at the first read (defaults)
        self._values: MappingProxyType | None = None  # what plans read now: the measured values, or a sweep's

    def __getattr__(self, entry: str) -> Any:
        if "_given" not in self.__dict__:  # not constructed yet (copy, pickle): no entries
            raise AttributeError(entry)
        values = self._current()
        if entry in values:
            return values[entry]
        raise AttributeError(f"{self._name} tuning has no entry {entry!r}; its entries: {sorted(values)}")

    @property
    def defaults(self) -> MappingProxyType:
        """The measured values on this process's GPU (the entries given, with its model's own over
        them), whatever a sweep has passed in."""
        if self._measured is None:
            name = gpu_name()
            own = [measured for model, measured in self._devices.items() if name is not None and model in name]
            if len(own) > 1:
                raise ValueError(f"{self._name} tuning has {len(own)} sets of entries for the GPU {name!r}; "
                                 f"its models: {sorted(self._devices)}")
            self._measured = MappingProxyType({**self._given, **(own[0] if own else {})})
        return self._measured

    def _current(self) -> MappingProxyType:
        if self._values is None:
            self._values = self.defaults
        return self._values

    def forget_with(self, forget: Callable[[], None]) -> Callable[[], None]:
        """Also empty this cache on every change (usable as a decorator of the clear function)."""
        self._forget.append(forget)
        return forget

    @contextlib.contextmanager
    def replaced(self, **entries: Any) -> Iterator[Tuning]:
        """These entries take these values until the with-block ends (nested blocks stack)."""
        unknown = sorted(set(entries) - set(self._given))
        if unknown:
            raise ValueError(f"{self._name} tuning has no entries {unknown}; its entries: {sorted(self._given)}")
        before = self._current()
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
        values, measured = self._current(), self.defaults
        changed = {k: v for k, v in values.items() if measured[k] is not v}
        return f"Tuning({self._name!r}, {dict(values)!r}" + (f", replaced: {sorted(changed)})" if changed else ")")
