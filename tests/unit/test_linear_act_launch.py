"""Every launch path of linear_act's forward, checked by the harness on this machine's backend.

The forward picks its path from the layouts (TMA descriptors, or pointers for strided x and K or N
not a multiple of 8) and its tiles from the product's size. The property tests reach the paths
their drawn sizes reach: on a GPU they stay below the 1024 x 1024 of the large tiles (256 x 128,
the epilogue split in column halves). Here each configuration of the GPU tables, and the
persistent variant the sweep measures, is forced (``FORCED_LAUNCH``) on a case that crosses its
tile edges in every dimension, and the harness's own forward and backward checks judge the
result (the backward starts from the z the forward saved). Under the interpreter the same
configurations run in numpy, slowly but exactly as written.
"""

import pytest

import kernels.linear_act as la
from harness.bench.runner import bench_case
from harness.checks import run_check
from harness.registry import load_specs
from harness.spec import BenchShape
from kernels._runtime import kernel_device_type

_TABLES = {"tma": (la._TMA_CONFIGS, True), "pointers": (la._POINTER_CONFIGS, False)}
_LAUNCHES = sorted({(name, cfg, tma) for name, (table, tma) in _TABLES.items() for _, cfg in table}, key=str)
_LAUNCHES.append(("tma persistent", la.MatmulConfig(256, 128, 64, 8, 8, 3, split_n=True, persistent=True), True))


def _label(launch):
    name, cfg, _ = launch
    split = ", split" if cfg.split_n else ""
    return f"{name} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} s{cfg.num_stages}{split}"


@pytest.mark.parametrize("launch", _LAUNCHES, ids=_label)
@pytest.mark.parametrize("check, dtype, activation", [
    ("forward", "bfloat16", "gelu"), ("backward", "float16", "gelu"), ("backward", "bfloat16", "relu"),
])
def test_each_forward_launch_passes_the_harness_checks(monkeypatch, launch, check, dtype, activation):
    _, cfg, tma = launch
    # Past one tile and ragged in M and N; K two blocks and a part; K and N multiples of 8 (TMA's rows).
    rows, out_features, in_features = cfg.block_m + 37, cfg.block_n + 56, 2 * cfg.block_k + 24
    spec = load_specs()["linear_act"]
    shape = BenchShape({"rows": rows, "out_features": out_features, "in_features": in_features}, dtype,
                       {"activation": activation})
    monkeypatch.setattr(la, "FORCED_LAUNCH", (cfg, tma))
    result = run_check(spec, la.linear_act, check, bench_case(spec, shape, seed=3), kernel_device_type())
    assert result.passed, result.details()


def test_forcing_tma_on_a_layout_it_cannot_move_is_refused(monkeypatch):
    import torch

    device = kernel_device_type()
    x = torch.randn(20, 36, device=device, dtype=torch.float16)  # rows of 72 bytes: not 16-aligned
    w = torch.randn(24, 36, device=device, dtype=torch.float16)
    b = torch.randn(24, device=device, dtype=torch.float16)
    with pytest.raises(ValueError, match="TMA needs"):
        la._forward(x, w, b, "relu", False, la._INTERPRETER_CONFIG, tma=True)
