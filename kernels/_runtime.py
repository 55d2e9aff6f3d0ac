"""Where kernels run: a CUDA device, or Triton's interpreter on the CPU.

The choice is made once, before any ``@triton.jit`` function is decorated, because Triton reads
``TRITON_INTERPRET`` at decoration time. A user may force the interpreter on a GPU machine with
``TRITON_INTERPRET=1``; nothing here ever turns it off.
"""

from __future__ import annotations

import functools
import os

import torch

from harness.validate import interpreting, kernel_device_type, small_tiles  # noqa: F401 - re-exported for the kernels
from kernels._launch import launch_key


def ensure_backend_selected() -> None:
    """Turn on the interpreter when no CUDA device is visible (idempotent)."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


@functools.lru_cache(maxsize=None)
def _sm_count_of(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device | int | None) -> int:
    """Streaming multiprocessors of a CUDA device (a device, an index, or None for the current
    one): the unit launch grids are sized in."""
    if isinstance(device, torch.device):
        device = device.index
    return _sm_count_of(torch.cuda.current_device() if device is None else device)


_RESIDENT: dict[str, int] = {}  # per compiled variant's hash
_RESIDENT_BY_CALL: dict[tuple, int] = {}  # per launch key (kernels._launch.launch_key): no warmup call
# Per-SM limits the device properties do not give (sm_80 and later): resident blocks, and the
# shared memory the driver reserves for each block.
_MAX_BLOCKS_PER_SM = 32
_RESERVED_SHARED_PER_BLOCK = 1024


def resident_programs(kernel, args: tuple, meta: dict, device: torch.device) -> int:
    """How many programs of ``kernel`` (a ``@triton.jit`` function, launched with ``args`` and the
    constexprs and options ``meta``) one SM of ``device`` holds at once: its registers, warps and
    shared memory against the SM's. Compiles the kernel as its launch would (``warmup``, as
    Triton's fused-softmax tutorial sizes its grid), without running it, so the answer is that of
    the very variant these arguments select (Triton specialises on integers equal to 1 or
    divisible by 16 and on pointer alignment); remembered per compiled variant. Call it on the
    kernel's device."""
    try:
        call = (kernel, device, launch_key(args), tuple(meta.items()))
        return _RESIDENT_BY_CALL[call]
    except KeyError:
        pass
    except Exception:  # an argument the launch key does not model: ask Triton every time
        call = None
    compiled = kernel.warmup(*args, grid=(1,), **meta)
    if compiled.hash not in _RESIDENT:
        compiled._init_handles()
        props = torch.cuda.get_device_properties(device)
        warps = compiled.metadata.num_warps
        regs_per_warp = -(-compiled.n_regs * 32 // 256) * 256  # registers are allocated 256 a warp
        by_regs = props.regs_per_multiprocessor // (regs_per_warp * warps)
        by_threads = props.max_threads_per_multi_processor // (32 * warps)
        by_shared = props.shared_memory_per_multiprocessor // (compiled.metadata.shared + _RESERVED_SHARED_PER_BLOCK)
        _RESIDENT[compiled.hash] = max(1, min(by_regs, by_threads, by_shared, _MAX_BLOCKS_PER_SM))
    if call is not None:
        _RESIDENT_BY_CALL[call] = _RESIDENT[compiled.hash]
    return _RESIDENT[compiled.hash]
