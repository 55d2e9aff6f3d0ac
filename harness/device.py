"""Where the harness runs kernels: one CUDA device per process, or the CPU through Triton's interpreter.

``configure_backend`` must run before any ``@triton.jit`` function is decorated (Triton reads
``TRITON_INTERPRET`` then); the pytest plugin and the CLI call it before loading specs. Under xdist,
worker ``gwN`` pins GPU ``N mod count`` among the visible ones, so CUDA_VISIBLE_DEVICES is honoured.
"""

from __future__ import annotations

import os
import re
import warnings

import torch

from harness.validate import interpreting  # one reading of TRITON_INTERPRET for the harness and kernels

_selected: torch.device | None = None


def configure_backend() -> None:
    """Use the interpreter when no CUDA device is visible (never turns it off if the user set it).
    The interpreter runs kernels in numpy, which warns where IEEE arithmetic makes an inf or a NaN
    (``-inf - -inf``, ``0 * inf``) exactly as the GPU does silently: known noise, filtered."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if interpreting():
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
        from harness import frame_chunks

        frame_chunks.install()  # each launch's frames in a stack chunk of their own (its docstring says why)


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


def share_cpu(processes: int) -> int:
    """Give this process its share of the CPU's cores for torch's host-side threads; returns it.

    Each of ``processes`` processes working side by side (xdist workers, nightly's verification
    workers) would otherwise start a thread per core for every host op (the dropout check's mask
    statistics, the interpreter's reductions): 16 workers on 16 cores ran 256 threads, and host
    work that takes milliseconds alone took seconds. Leaves the count alone for one process.
    """
    if processes <= 1:
        return torch.get_num_threads()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = max(1, cores // processes)
    torch.set_num_threads(share)
    return share


def current_device() -> torch.device:
    return _selected if _selected is not None else select_device(os.environ.get("PYTEST_XDIST_WORKER"))


def on_gpu(device: torch.device | None = None) -> bool:
    return (device or current_device()).type == "cuda"


def describe(device: torch.device | None = None) -> str:
    device = device or current_device()
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return "cpu (Triton interpreter)"


def lost_context(device: torch.device) -> str | None:
    """None while ``device`` works; else the error a synchronisation raises (first line)."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except Exception as error:  # AcceleratorError on torch 2.11; RuntimeError on older builds
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
    return None


class ContextWatch:
    """Stops a worker from blaming kernels for a CUDA context that an earlier test destroyed.

    An illegal memory access or a device-side assert is sticky: every later CUDA call in the
    process raises the same error. On the H100 one such error in a worker's first test made its
    next 16 tests (other kernels) fail with that error, each reading like a fault of its own
    kernel. After each test the watch probes the device; once it is lost, later tests are refused
    with a message that names the test where it happened.
    """

    def __init__(self, probe=lost_context) -> None:
        self._probe = probe
        self.lost: tuple[str, str] | None = None

    def after(self, nodeid: str, device: torch.device) -> bool:
        """Probe the device after test ``nodeid``; True if it was lost during that test."""
        if self.lost is None:
            error = self._probe(device)
            if error is not None:
                self.lost = (nodeid, error)
                return True
        return False

    def refusal(self) -> str | None:
        """Why the next test cannot run here, or None."""
        if self.lost is None:
            return None
        nodeid, error = self.lost
        return (f"not run: this worker's CUDA context was lost during {nodeid} ({error}); every later "
                f"CUDA call in this process fails with that error. Rerun this test in a fresh process.")

