"""How many programs of a compiled kernel an SM holds (``kernels._runtime.resident_programs``),
which sizes the activation kernels' backward grid to one wave: checked against a stand-in of an
H100's limits and of Triton's compiled kernel, so that it runs without a GPU."""

from types import SimpleNamespace

import pytest
import torch

import kernels._runtime as runtime

_H100 = SimpleNamespace(regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                        shared_memory_per_multiprocessor=233472)


class _Kernel:
    """A jit function's stand-in: ``warmup`` returns a compiled kernel with these resources."""

    def __init__(self, regs, warps, shared=0):
        self.loads = self.warmups = 0
        self.compiled = SimpleNamespace(hash=f"{regs}-{warps}-{shared}", n_regs=regs, _init_handles=self._load,
                                        metadata=SimpleNamespace(num_warps=warps, shared=shared))

    def _load(self):
        self.loads += 1

    def warmup(self, *args, grid, **meta):
        self.warmups += 1
        return self.compiled


@pytest.mark.parametrize("regs, warps, shared, expected", [
    (80, 8, 0, 3),  # bias_gelu's tanh backward on the H100 (ptxas: 80 registers)
    (84, 8, 0, 2),  # rounds up to 88 a thread (256 a warp): 3 would fit at 84
    (24, 4, 0, 16),  # threads bind (2048 / 128), where registers would allow 21
    (16, 1, 0, 32),  # the 32 blocks an SM holds bind
    (40, 4, 100_000, 2),  # shared memory binds (with 1 KB reserved a block)
    (40, 4, 115_800, 1),  # 2 x (115800 + 1024) bytes is over the SM's 233472
    (255, 8, 0, 1),
])
def test_resident_programs_follow_the_scarcest_resource(monkeypatch, regs, warps, shared, expected):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: _H100)
    monkeypatch.setattr(runtime, "_RESIDENT", {})
    monkeypatch.setattr(runtime, "_RESIDENT_BY_CALL", {})
    kernel = _Kernel(regs, warps, shared)
    device = torch.device("cuda", 0)
    assert runtime.resident_programs(kernel, (torch.empty(1),), {"BLOCK": 1024}, device) == expected
    runtime.resident_programs(kernel, (torch.empty(1),), {"BLOCK": 1024}, device)
    assert kernel.loads == 1  # remembered per compiled variant
    assert kernel.warmups == 1  # and per launch key: a repeated call asks Triton nothing
    other = runtime.resident_programs(kernel, (torch.empty(1), 17), {"BLOCK": 1024}, device)
    assert other == expected and kernel.warmups == 2  # another key asks again; the variant is known
