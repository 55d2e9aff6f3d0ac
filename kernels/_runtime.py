"""Where kernels run: a CUDA device, or Triton's interpreter on the CPU.

The choice is made once, before any ``@triton.jit`` function is decorated, because Triton reads
``TRITON_INTERPRET`` at decoration time. A user may force the interpreter on a GPU machine with
``TRITON_INTERPRET=1``; nothing here ever turns it off.
"""

from __future__ import annotations

import functools
import os

import torch


def ensure_backend_selected() -> None:
    """Turn on the interpreter when no CUDA device is visible (idempotent)."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def kernel_device_type() -> str:
    """The device type kernel inputs must live on: 'cpu' under the interpreter, else 'cuda'."""
    return "cpu" if interpreting() else "cuda"


@functools.lru_cache(maxsize=None)
def _sm_count_of(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device | int | None) -> int:
    """Streaming multiprocessors of a CUDA device (a device, an index, or None for the current
    one): the unit launch grids are sized in."""
    if isinstance(device, torch.device):
        device = device.index
    return _sm_count_of(torch.cuda.current_device() if device is None else device)
