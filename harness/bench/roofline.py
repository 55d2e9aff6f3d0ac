"""The device's measured ceilings: device-to-device copy bandwidth and bf16 matmul throughput.

Datasheet numbers flatter; a kernel is placed against what this device, as found, actually does.
Measured once per process (and per run: the nightly job stores them in its results), with the same
interleaved event timing as the benchmarks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from harness.bench.timing import TimingPlan, median, time_interleaved


@dataclass(frozen=True)
class Roofline:
    copy_gbps: float  # bytes read + bytes written per second, in GB/s
    matmul_tflops: float  # bf16 dense matmul, TFLOP/s

    def to_json(self) -> dict:
        return {"copy_gbps": self.copy_gbps, "matmul_tflops": self.matmul_tflops}


@functools.lru_cache(maxsize=None)
def measure(device_index: int) -> Roofline:
    device = torch.device("cuda", device_index)
    n = 1 << 28  # 1 GiB of fp32: far past L2
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    m = 8192
    a = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    b = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    samples = time_interleaved(
        {"copy": lambda i: dst.copy_(src), "matmul": lambda i: a @ b},
        device, TimingPlan(warmup=3, repetitions=20, input_sets=1, flush_l2=False, spin_cycles=0),
    )
    copy_s = median(samples["copy"]) / 1e3
    matmul_s = median(samples["matmul"]) / 1e3
    return Roofline(copy_gbps=2 * n * 4 / copy_s / 1e9, matmul_tflops=2 * m**3 / matmul_s / 1e12)
