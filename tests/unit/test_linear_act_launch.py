"""Every launch path of linear_act's forward, checked by the harness on this machine's backend.

The forward picks its path from the layouts (TMA descriptors, or pointers for strided x and K or N
not a multiple of 8) and its tiles from the product's size. The property tests reach the paths
their drawn sizes reach: on a GPU they stay below the 1024 x 1024 of the large tiles (128 x 256,
the epilogue split in column halves, persistent). Here each configuration of the GPU tables is
forced (``FORCED_LAUNCH``) on a case that crosses its tile edges in every dimension (and, for a
persistent launch on a GPU, has more tiles than the device has SMs, so that programs walk several),
and the harness's own forward and backward checks judge the result (the backward starts from the z
the forward saved). Under the interpreter the same configurations run in numpy, exactly as written.
"""

import pytest

import kernels.linear_act as la
from harness.bench.runner import bench_case
from harness.dispatch import run_check
from harness.registry import load_specs
from harness.spec import BenchShape
from kernels._runtime import kernel_device_type

_TABLES = {"tma": (la._TMA_CONFIGS, True), "pointers": (la._POINTER_CONFIGS, False)}
_LAUNCHES = sorted({(name, cfg, tma) for name, (table, tma) in _TABLES.items() for _, cfg in table}, key=str)


def _label(launch):
    name, cfg, _ = launch
    split = ", split" if cfg.split_n else ""
    persistent = ", persistent" if cfg.persistent else ""
    return f"{name} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} s{cfg.num_stages}{split}{persistent}"


@pytest.mark.parametrize("launch", _LAUNCHES, ids=_label)
@pytest.mark.parametrize("check, dtype, activation", [
    ("forward", "bfloat16", "gelu"), ("backward", "float16", "gelu"), ("backward", "bfloat16", "relu"),
])
def test_each_forward_launch_passes_the_harness_checks(monkeypatch, launch, check, dtype, activation):
    _, cfg, tma = launch
    device = kernel_device_type()
    # Past one tile and ragged in M and N; K two blocks and a part; K and N multiples of 8 (TMA's
    # rows). A persistent launch on a GPU gets 13 x 13 tiles: more than any GPU's SMs here.
    tiles = 13 if cfg.persistent and device == "cuda" else 1
    rows, out_features, in_features = tiles * cfg.block_m + 37, tiles * cfg.block_n + 56, 2 * cfg.block_k + 24
    spec = load_specs()["linear_act"]
    shape = BenchShape({"rows": rows, "out_features": out_features, "in_features": in_features}, dtype,
                       {"activation": activation})
    monkeypatch.setattr(la, "FORCED_LAUNCH", (cfg, tma))
    ran = []
    for path in ("_launch_tma", "_launch_pointers"):
        launch = getattr(la, path)
        monkeypatch.setattr(la, path, lambda *args, launch=launch, path=path: (ran.append((path, args[-1])), launch(*args)))
    result = run_check(spec, la.linear_act, check, bench_case(spec, shape, seed=3), device)
    assert result.passed, result.details()
    assert set(ran) == {("_launch_tma" if tma else "_launch_pointers", cfg)}  # the forced launch, every call


@pytest.mark.parametrize("how", ["argument", "FORCED_LAUNCH"])
def test_forcing_tma_on_a_layout_it_cannot_move_is_refused(monkeypatch, how):
    import torch

    device = kernel_device_type()
    x = torch.randn(20, 36, device=device, dtype=torch.float16)  # rows of 72 bytes: not 16-aligned
    w = torch.randn(24, 36, device=device, dtype=torch.float16)
    b = torch.randn(24, device=device, dtype=torch.float16)
    if how == "FORCED_LAUNCH":
        monkeypatch.setattr(la, "FORCED_LAUNCH", (la._INTERPRETER_CONFIG, True))
        config, tma = None, None
    else:
        config, tma = la._INTERPRETER_CONFIG, True
    with pytest.raises(ValueError, match="TMA needs"):
        la._forward(x, w, b, "relu", False, config, tma)


def test_broadcast_rows_take_the_pointer_kernel():
    import torch

    w = torch.randn(1, 64, dtype=torch.float16).expand(24, 64)  # one row for all: stride 0
    assert not la.tma_ready(w) and la.tma_ready(w.contiguous())
