"""Per-GPU locks across xdist workers: property tests share a GPU, timing has it alone.

A readers-writer lock on a file per GPU (``fcntl.flock``): verification takes it shared, so several
workers may verify on one GPU at once; a benchmark takes it exclusive, so no other worker runs
anything on that GPU while it is timed. The lock files live in the system temp directory, keyed by
the GPU's UUID when torch exposes it, so workers that see the GPU under different indices (other
CUDA_VISIBLE_DEVICES) still agree.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator

import torch


def _lock_path(device: torch.device) -> str:
    props = torch.cuda.get_device_properties(device)
    ident = str(getattr(props, "uuid", "") or f"index{device.index}")
    return os.path.join(tempfile.gettempdir(), f"harness-gpu-{ident}.lock")


@contextlib.contextmanager
def gpu_lock(device: torch.device, exclusive: bool) -> Iterator[None]:
    """Hold the device's lock (no-op off CUDA) for the duration of the block."""
    if device.type != "cuda":
        yield
        return
    with open(_lock_path(device), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
