"""LayerNorm's row mean in fp32 arithmetic (16-bit inputs) is within an ulp of the exact one.

The kernel shifts each row by its first element K and stores K and m, the mean of s - K. Where K
sits a spread away from the mean, s - K carries a bias of that size, and two fp32 sums of it went
several ulps wrong: the tree sum of a block (the H100 nightly: a bf16 output 2 ulps off at an
element near the row mean, 2.12x its envelope) and Chan's running mean over the blocks of a
streamed row (the same case on the interpreter's small tile: 4.4 ulps, 6.5x). The kernel refines
each block's mean with the mean of its deviations and carries the running mean's rounding
(``kernels._norm_stats._block_mean``, ``_stats_add``). Checked on the kernels' device with the H100
case's rows: as one block (the GPU tile) and streamed in blocks (the interpreter's tile).
"""

import pytest
import torch

import kernels._norm as norm
import kernels._norm_tiling as norm_tiling
from harness.case import Case
from kernels._runtime import kernel_device_type

_CASE = {"dims": {"*batch": [], "cols": 8193, "rows": 127}, "dtype": "bfloat16", "grad_layout": "contiguous",
         "grad_seed": 0, "scalars": {"affine": "weight", "eps": 1e-05}, "schema": 1, "spec": "layer_norm",
         "tensors": {name: {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []},
                            "seed": 0, "shape": shape, "values": "normal"}
                     for name, shape in (("x", [127, 8193]), ("weight", [8193]), ("bias", [8193]))}}


@pytest.fixture(params=["one block", "streamed"])
def tiling(request, monkeypatch):
    limits = {"one block": norm_tiling._GPU_FWD, "streamed": norm_tiling._INTERPRETER_FWD}[request.param]
    monkeypatch.setattr(norm_tiling, "_fwd_limits", lambda: limits)
    norm_tiling._tile.cache_clear()
    yield request.param
    norm_tiling._tile.cache_clear()


def test_the_mean_is_within_an_ulp_of_the_exact_one(tiling):
    x = Case.from_json(_CASE).build("cpu")["x"].tensor.to(kernel_device_type())
    stats = norm.forward(x, None, None, eps=1e-5, rms=False).stats.double().cpu()
    rows = x.double().cpu()
    k, m = stats[0], stats[1]
    error = (k + m) - rows.mean(dim=1)
    ulp = (rows - k[:, None]).abs().mean(dim=1) * torch.finfo(torch.float32).eps  # of mean |s - K|
    worst = (error.abs() / ulp).max().item()
    assert worst <= 1.0, f"{tiling}: the mean is {worst:.2f} ulps of mean |s - K| off"
