"""Where kernels run: a CUDA device, or Triton's interpreter on the CPU.

The choice is made once, before any ``@triton.jit`` function is decorated, because Triton reads
``TRITON_INTERPRET`` at decoration time. A user may force the interpreter on a GPU machine with
``TRITON_INTERPRET=1``; nothing here ever turns it off.
"""

from __future__ import annotations

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
