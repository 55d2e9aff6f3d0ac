"""Specs for tests/unit/test_parallel.py, registered through HARNESS_SPECS in spawned workers.

Plain-torch "kernels" keep the workers fast: a correct one, one that also validates its input, a wrong one, a slow one, one that
holds a file lock while it works (as torch's CUDA extension build does), at the path in
$PAR_LOCK_PATH, one that turns an interrupt into an ordinary error, and one that kills its process.
"""

import os
import time
from dataclasses import dataclass

import torch

from harness import Dim, Implementation, KernelSpec, TensorArg


def _scale(x):
    return x * 2


def _scale_checked(x):
    from kernels._validate import check_tensor

    return check_tensor("scale", "x", x, dtypes=(torch.float32,)) * 2


def _scale_wrong(x):
    return x * 2 + (x.abs() > 0).to(x.dtype)


def _scale_slow(x):
    time.sleep(5)
    return x * 2


def _scale_locked(x):
    from torch.utils.file_baton import FileBaton

    baton = FileBaton(os.environ["PAR_LOCK_PATH"])
    if not baton.try_acquire():
        raise RuntimeError("the lock is already held")
    try:
        time.sleep(60)
        return x * 2
    finally:
        baton.release()


_interrupted = []


def _scale_masks_interrupts(x):
    if _interrupted:  # once broken, always broken (as a half-imported module is)
        raise ImportError("initialization failed")
    try:
        time.sleep(60)
    except KeyboardInterrupt:  # as an extension module's init does: "initialization failed"
        _interrupted.append(True)
        raise ImportError("initialization failed") from None
    return x * 2


def _scale_dies(x):
    os._exit(3)  # as a segfault or the OOM killer would end the process


def _spec(name, fn):
    return KernelSpec(
        name=name, reference=_scale, implementations={"torch": Implementation(load=lambda: fn, custom_ops=False)},
        tensors=(TensorArg("x", dims=("n",)),), dims={"n": Dim(cpu_max=8, gpu_max=8)},
        dtypes=("float32",), deterministic=False,
    )


PAR_GOOD = _spec("par_good", _scale)
PAR_CHECKED = _spec("par_checked", _scale_checked)  # passes every check, its contract too
PAR_WRONG = _spec("par_wrong", _scale_wrong)
PAR_SLOW = _spec("par_slow", _scale_slow)
PAR_LOCKED = _spec("par_locked", _scale_locked)
PAR_DIES = _spec("par_dies", _scale_dies)
PAR_MASKS = _spec("par_masks", _scale_masks_interrupts)
_UNUSED = torch  # the module imports torch like any spec module


@dataclass(frozen=True)
class EchoTask:
    """A plain task for harness.parallel.run_tasks: returns its value, or raises if it is negative."""

    value: int

    @property
    def label(self) -> str:
        return f"echo {self.value}"

    def run(self) -> int:
        if self.value < 0:
            raise ValueError(f"negative: {self.value}")
        return self.value * 10

    def crashed(self, what: str, inflight=None) -> str:
        return f"crashed: {what}"
