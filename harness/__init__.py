"""A reference-and-verification harness for fused GPU kernels.

Public API for spec authors: ``KernelSpec`` and its parts (``TensorArg``, ``Dim``, ``Batch``,
``Numerics``, ``BadInput``, ``KnownFailure``, ``Implementation``, ``PerfModel``, ``BenchShape``,
``OptionalPeer``, ``TilingCase``),
``register_value_kind`` for op-specific value distributions, and ``torch_dtype`` (a dtype's name
to the torch dtype). For kernel authors: ``harness.validate``, the input checks the ``contract``
check expects.

The names load on first use, so that ``import harness.validate`` (which a kernel does on every
import) and the pytest plugin (which every pytest run of an environment with the harness loads)
import nothing else.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **{name: "harness.spec" for name in (
        "BATCH", "BadInput", "Batch", "BenchShape", "Dim", "Implementation", "KernelSpec", "KnownFailure",
        "Numerics", "OptionalPeer", "PerfModel", "SpecError", "TensorArg", "TilingCase")},
    "register_value_kind": "harness.values",
    "torch_dtype": "harness.case",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
