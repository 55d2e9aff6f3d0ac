"""Input validation for kernel wrappers: the checks the harness's ``contract`` check expects.

Each failure names the operation, the argument and what was expected, so that a caller's mistake
reads as such instead of surfacing as a Triton compile error or a silent wrong answer. Dtype
problems raise ``TypeError``; device, shape and value problems raise ``ValueError``. The
``contract`` check (``harness.checks.bad_calls``) calls a kernel with each of these mistakes and
demands that exception, with the argument's name in its message (docs/contract.md).

This is the one module of the harness a kernel imports: it needs only torch, and
``import harness.validate`` loads nothing else of the harness.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def interpreting() -> bool:
    """Whether Triton kernels run in its CPU interpreter (``TRITON_INTERPRET=1``), read now."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_OFF, _ON = ("", "0", "false", "no", "off"), ("1", "true", "yes", "on")


def small_tiles() -> bool:
    """Whether the kernels pick their small tiles: always under the interpreter, and on a GPU where
    ``HARNESS_SMALL_TILES`` is 1 (or true, yes, on), read now; the kernel modules read it once,
    at import. Any other value than those and 0 (false, no, off, empty) raises ValueError.

    Each kernel's tiling code chooses between two sets of limits with this one switch: the GPU's
    measured ones, and small ones under which CPU-sized cases already take every path (rows of
    several column blocks, streamed two-pass rows, split and grouped reductions, partial tiles).
    On a GPU the small tiles are slow but legal: a test can run the very paths the CPU suite runs.
    """
    value = os.environ.get("HARNESS_SMALL_TILES", "0").strip().lower()
    if value not in _OFF + _ON:
        raise ValueError(f"HARNESS_SMALL_TILES must be 1 (small tiles) or 0, got {value!r}")
    return interpreting() or value in _ON


_ROUTED = [0]  # depth of custom_ops_routed() blocks


def call_custom_op() -> bool:
    """Whether a kernel's entry point should call its custom op (``torch.library.custom_op``)
    rather than its eager path: while ``torch.compile`` traces it, or inside
    :func:`custom_ops_routed` (the harness's opcheck check records the custom ops a call makes
    there). An entry point whose eager path is already its custom op need not ask."""
    return _ROUTED[0] > 0 or _is_compiling()


_is_compiling = torch.compiler.is_compiling  # bound once: every kernel call asks (Dynamo knows the function)


@contextlib.contextmanager
def custom_ops_routed() -> Iterator[None]:
    """Within the block, :func:`call_custom_op` is true: entry points call their custom ops in
    eager mode too."""
    _ROUTED[0] += 1
    try:
        yield
    finally:
        _ROUTED[0] -= 1


_DEVICE_TYPE: list[str] = []  # set at the first call (a plain list: torch.compile traces it, no cache wrapper)


def kernel_device_type() -> str:
    """The device type kernel inputs must live on: 'cpu' under Triton's interpreter, else 'cuda'.
    Fixed at the first call, as the kernels' backend is fixed when they are decorated."""
    if not _DEVICE_TYPE:
        _DEVICE_TYPE.append("cpu" if interpreting() else "cuda")
    return _DEVICE_TYPE[0]


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def check_tensor(
    op: str,
    name: str,
    value: object,
    *,
    dtypes: Sequence[torch.dtype] = FLOAT_DTYPES,
    min_ndim: int = 0,
    ndim: int | None = None,
) -> torch.Tensor:
    """Check one tensor argument's type, device, dtype and rank; return it unchanged."""
    if (type(value) is torch.Tensor and value.dtype in dtypes and value.device.type == kernel_device_type()
            and value.ndim >= min_ndim and (ndim is None or value.ndim == ndim)):
        return value  # the common case in one test: this runs on every call
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: argument '{name}' must be a torch.Tensor, got {type(value).__name__}")
    want_device = kernel_device_type()
    if value.device.type != want_device:
        raise ValueError(
            f"{op}: argument '{name}' must be on a {want_device} device "
            f"(kernels run {'in the Triton interpreter' if want_device == 'cpu' else 'on CUDA'}), "
            f"got a tensor on {value.device}"
        )
    if value.dtype not in dtypes:
        raise TypeError(
            f"{op}: argument '{name}' has dtype {str(value.dtype).removeprefix('torch.')}; "
            f"expected one of {_dtype_names(dtypes)}"
        )
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{op}: argument '{name}' must have {ndim} dimensions, got shape {tuple(value.shape)}")
    if value.ndim < min_ndim:
        raise ValueError(
            f"{op}: argument '{name}' must have at least {min_ndim} dimension(s), got shape {tuple(value.shape)}"
        )
    return value


def check_same_device(op: str, **tensors: torch.Tensor) -> None:
    """All tensors on one device (the kernel launches on a single device)."""
    devices = {name: t.device for name, t in tensors.items()}
    first_name, first = next(iter(devices.items()))
    for name, dev in devices.items():
        if dev != first:
            raise ValueError(f"{op}: argument '{name}' is on {dev} but '{first_name}' is on {first}")


def check_same_dtype(op: str, **tensors: torch.Tensor) -> None:
    """All tensors of one dtype (no implicit promotion inside a kernel)."""
    first_name, first = next(iter(tensors.items()))
    for name, t in tensors.items():
        if t.dtype != first.dtype:
            raise TypeError(
                f"{op}: argument '{name}' has dtype {str(t.dtype).removeprefix('torch.')} but "
                f"'{first_name}' has {str(first.dtype).removeprefix('torch.')}; they must match"
            )


def check_shape(op: str, name: str, value: torch.Tensor, expected: Sequence[int], what: str = "") -> None:
    """Exact shape match, with the expected shape and why it is expected in the message."""
    if tuple(value.shape) != tuple(expected):
        because = f" ({what})" if what else ""
        raise ValueError(
            f"{op}: argument '{name}' has shape {tuple(value.shape)}; expected {tuple(expected)}{because}"
        )


def check_choice(op: str, name: str, value: object, choices: Iterable[str]) -> str:
    """A string argument drawn from a fixed set."""
    options = tuple(choices)
    if value not in options:
        raise ValueError(f"{op}: argument '{name}' must be one of {', '.join(map(repr, options))}, got {value!r}")
    return value  # type: ignore[return-value]


def check_finite_scalar(op: str, name: str, value: object) -> float:
    """A real, finite Python scalar (kernels take scalars by value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: argument '{name}' must be a float, got {type(value).__name__}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{op}: argument '{name}' must be finite, got {value}")
    return float(value)
