"""Small tiles and tiling cases: every tiling path runs at CPU sizes, whatever the draws."""

import os
import subprocess
import sys

import pytest
from hypothesis import strategies as st

from harness import Batch, Dim, KernelSpec, TensorArg, TilingCase
from harness.device import current_device
from harness.layouts import Layout
from harness.runner import TILING_CHECKS, PropertyRun
import harness.runner as runner
from harness.strategies import tiling_examples


def _ref(x, scale=1.0):
    return x * scale


def _spec(**overrides) -> KernelSpec:
    fields = dict(
        name="scaled",
        reference=_ref,
        implementations={"triton": _ref},
        tensors=(TensorArg("x", dims=("*batch", "rows", "cols"), grad=True, values=("normal", "large")),),
        dims={"*batch": Batch(max_rank=1, cpu_max=2), "rows": Dim(cpu_max=6), "cols": Dim(cpu_max=140)},
        scalars={"scale": st.floats(0.0, 1.0)},
        dtypes=("float32", "float64"),
        tiling_cases=(TilingCase("rows of three blocks", dims={"*batch": [2], "rows": 5, "cols": 129}, scalars={"scale": 0.5}),
                      TilingCase("one block", dims={"cols": 7})),
    )
    fields.update(overrides)
    return KernelSpec(**fields)


def test_a_tiling_case_pins_its_sizes_and_scalars_in_plain_memory_and_is_the_same_on_every_run():
    spec = _spec()
    first = tiling_examples(spec, "float32", on_gpu=False, salt=7)
    again = tiling_examples(spec, "float32", on_gpu=False, salt=7)
    assert first == again
    pinned, free = first
    assert pinned.dims == {"*batch": [2], "rows": 5, "cols": 129} and pinned.scalars == {"scale": 0.5}
    assert pinned.tensors["x"].shape == (2, 5, 129)
    for case in first:  # contiguous, the first value kind, a contiguous grad_output
        assert case.tensors["x"].layout == Layout() and case.tensors["x"].values == "normal"
        assert case.grad_layout == "contiguous"
    assert free.dims["cols"] == 7 and 1 <= free.dims["rows"] <= 6  # the unpinned sizes are drawn
    # another property (another salt) draws its own seeds around the same pinned sizes
    other = tiling_examples(spec, "float32", on_gpu=False, salt=8)[0]
    assert other.dims == pinned.dims and other.tensors["x"].seed != pinned.tensors["x"].seed


@pytest.mark.parametrize("check", ["forward", "backward", "gradcheck"])
def test_the_checks_that_judge_cases_run_the_tiling_cases_first(check, monkeypatch):
    seen = []

    def spy(spec, fn, check_name, case, device):
        seen.append(case.dims)
        return original(spec, fn, check_name, case, device)

    original = runner.run_check
    monkeypatch.setattr(runner, "run_check", spy)
    spec = _spec()
    dtype = "float64" if check == "gradcheck" else "float32"
    PropertyRun(spec, "triton", dtype, check, current_device(), max_examples=2).run()
    pinned = [dict(t.dims) for t in spec.tiling_cases]
    if check in TILING_CHECKS:
        assert seen[0] == pinned[0] and seen[1]["cols"] == 7  # first, in order, before any draw
        assert len(seen) >= 2 + 2
    else:  # gradcheck (a numerical Jacobian) does not, nor the contract (bad calls, not cases)
        assert pinned[0] not in seen and "contract" not in TILING_CHECKS


def test_small_tiles_are_one_switch_the_interpreter_turns_on_and_a_gpu_run_can_ask_for():
    code = "from kernels._runtime import small_tiles; print(small_tiles())"
    def ask(**env):
        full = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "HARNESS_SMALL_TILES")}
        full.update(env)
        out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, check=True)
        return out.stdout.strip()
    assert ask(TRITON_INTERPRET="1") == "True"
    assert ask(TRITON_INTERPRET="0", HARNESS_SMALL_TILES="1") == "True"
    assert ask(TRITON_INTERPRET="0", HARNESS_SMALL_TILES="0") == "False"
    assert ask(TRITON_INTERPRET="0") == "False"
    assert ask(TRITON_INTERPRET="0", HARNESS_SMALL_TILES="off") == "False"
    assert ask(TRITON_INTERPRET="0", HARNESS_SMALL_TILES="true") == "True"


def test_a_small_tiles_value_that_is_neither_on_nor_off_is_refused_by_name(monkeypatch):
    from harness.validate import small_tiles

    monkeypatch.setenv("HARNESS_SMALL_TILES", "maybe")
    with pytest.raises(ValueError, match="HARNESS_SMALL_TILES must be 1 .* got 'maybe'"):
        small_tiles()


def test_the_norms_tiling_cases_reach_several_column_blocks_and_row_groups_under_the_small_tiles():
    from harness.registry import load_specs
    from kernels import _norm_tiling, _rows

    if not _rows._SMALL_TILES:
        pytest.skip("this process runs the GPU's own tiles (HARNESS_SMALL_TILES unset); the cases are sized for the small ones")
    import torch

    for name in ("layer_norm", "rms_norm"):
        wide, narrow = load_specs()[name].tiling_cases
        rows = lambda t: t.dims["*batch"][0] * t.dims["rows"]  # noqa: E731
        assert _norm_tiling._tile(wide.dims["cols"], torch.float32, True, False).col_blocks == 3
        assert _norm_tiling._tile(wide.dims["cols"], torch.float32, False, False).col_blocks == 3
        bwd = _norm_tiling._tile(narrow.dims["cols"], torch.float32, True, False)
        assert bwd.col_blocks == 1
        tiles = -(-rows(narrow) // bwd.rows)
        assert tiles >= 3 and rows(narrow) % bwd.rows and -(-tiles // _norm_tiling._INTERPRETER_TILES_PER_GROUP) >= 2
    drop = load_specs()["dropout_add_norm"].tiling_cases[0]
    assert drop.scalars["p"] > 0 and _norm_tiling._tile(drop.dims["cols"], torch.float32, True, True).col_blocks == 2

