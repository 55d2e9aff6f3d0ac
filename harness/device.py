"""Where the harness runs kernels: one CUDA device per process, or the CPU through Triton's interpreter.

``configure_backend`` must run before any ``@triton.jit`` function is decorated (Triton reads
``TRITON_INTERPRET`` then); the pytest plugin and the CLI call it before loading specs. Under xdist,
worker ``gwN`` pins GPU ``N mod count`` among the visible ones, so CUDA_VISIBLE_DEVICES is honoured.
"""

from __future__ import annotations

import os
import re

import torch

_selected: torch.device | None = None


def configure_backend() -> None:
    """Use the interpreter when no CUDA device is visible (never turns it off if the user set it)."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def worker_index(worker_id: str | None) -> int:
    match = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(match.group(1)) if match else 0


def select_device(worker_id: str | None = None) -> torch.device:
    """Pick (and remember) this process's device; on CUDA, pin it as the current device."""
    global _selected
    configure_backend()
    if interpreting():
        _selected = torch.device("cpu")
    else:
        index = worker_index(worker_id) % torch.cuda.device_count()
        torch.cuda.set_device(index)
        _selected = torch.device("cuda", index)
    return _selected


def current_device() -> torch.device:
    return _selected if _selected is not None else select_device(os.environ.get("PYTEST_XDIST_WORKER"))


def on_gpu(device: torch.device | None = None) -> bool:
    return (device or current_device()).type == "cuda"


def describe(device: torch.device | None = None) -> str:
    device = device or current_device()
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return "cpu (Triton interpreter)"
