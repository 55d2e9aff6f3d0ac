"""A reference-and-verification harness for fused GPU kernels.

Public API for spec authors: ``KernelSpec`` and its parts (``TensorArg``, ``Dim``, ``Batch``,
``BadInput``, ``KnownFailure``, ``Implementation``, ``PerfModel``, ``BenchShape``, ``OptionalPeer``) and
``register_value_kind`` for op-specific value distributions.
"""

from harness.spec import (
    BATCH,
    BadInput,
    Batch,
    BenchShape,
    Dim,
    Implementation,
    KernelSpec,
    KnownFailure,
    OptionalPeer,
    PerfModel,
    SpecError,
    TensorArg,
)
from harness.values import register_value_kind

__all__ = [
    "BATCH",
    "BadInput",
    "Batch",
    "BenchShape",
    "Dim",
    "Implementation",
    "KernelSpec",
    "KnownFailure",
    "OptionalPeer",
    "PerfModel",
    "SpecError",
    "TensorArg",
    "register_value_kind",
]
