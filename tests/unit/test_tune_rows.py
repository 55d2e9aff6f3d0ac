"""The tiling sweep's own machinery (``benchmarks/tune_rows.py``), on the CPU: which launches it
times, that it passes each candidate in through the kernels' tuning and leaves the measured
values in place, and that its diagnostics run at the production launch rather than at whichever
candidate ran before them."""

import itertools

import pytest
import torch

import kernels._norm_tiling as tiling
from benchmarks import tune_rows
from kernels import _rows
from kernels._runtime import kernel_device_type


@pytest.fixture
def on_gpu(monkeypatch):
    """Tiles as a GPU chooses them (no kernel is launched by these tests)."""
    monkeypatch.setattr(_rows, "_SMALL_TILES", False)
    monkeypatch.setattr(tiling, "_fwd_limits", lambda: tiling.TUNING.forward)
    tiling._tile.cache_clear()
    yield
    tiling._tile.cache_clear()


def _spy(cols, dtype):
    """A pass that reports the dropout forward's tile and the fp32 arithmetic flag it would run with."""
    return lambda *args: (tiling._tile(cols, dtype, False, True), tiling._wide())


def test_module_knobs_are_candidates_of_their_own():
    target = tune_rows.TARGETS["norm_backward_groups"]
    assert set(target.grid) == set(target.knobs)  # knobs only: every candidate has the same tile
    candidates = tune_rows._candidates(target, 1024, 4)
    expected = [dict(zip(target.grid, values)) for values in itertools.product(*target.grid.values())]
    assert [c.knobs for c in candidates.values()] == expected and len(expected) > 1
    assert all(c.limits == target.get() for c in candidates.values())  # a knob is not a TileLimits field


def test_a_candidate_call_passes_its_knob_in_for_that_call_alone():
    target = tune_rows.TARGETS["norm_backward_groups"]
    seen = []
    candidate = tune_rows.Candidate(target.get(), {"programs_per_sm": 5})
    tune_rows._kernel_call(target, candidate, lambda: seen.append(tiling._bwd_programs_per_sm(False)), [()])(0)
    assert seen == [5] and tiling.TUNING.backward_programs_per_sm is None
    assert tiling._bwd_programs_per_sm(False) == tiling._GPU_BWD_PROGRAMS_PER_SM


def test_the_fp32_diagnostic_runs_at_the_production_tile(on_gpu):
    target = tune_rows.TARGETS["dropout_norm_forward"]
    cols, fp32 = 1024, torch.float32
    production = _rows.row_tile(cols, 4, tiling._GPU_FWD_DROPOUT)
    op = tune_rows.Op("dropout_add_layer_norm forward 8x1024", 8, cols, fp32, lambda x: (x,),
                      {"fwd": _spy(cols, fp32)}, lambda x: x)
    base = target.get()  # as tune_op takes it, before any call
    candidates = tune_rows._candidates(target, cols, 4)
    other = next(c for c in candidates.values() if _rows.row_tile(cols, 4, c.limits) != production)
    tile, _ = tune_rows._kernel_call(target, other, op.passes["fwd"], [()])(0)
    assert tile != production  # the candidate's launch was in place for its call...
    tile, wide = tune_rows._fp32_diagnostic(target, op, base, [()])(0)
    assert tile == production  # ...and the diagnostic passes the production one in
    assert fp32 not in wide  # with fp32 arithmetic, for that call only
    assert fp32 in tiling._wide() and tiling.TUNING.dropout_forward == base == tiling._GPU_FWD_DROPOUT


@pytest.mark.parametrize("name, fp64_math", [("elementwise", True), ("elementwise_fp32", True),
                                             ("elementwise_fp32_math", False)])
def test_elementwise_targets_set_the_limits_their_ops_launch_with(name, fp64_math, monkeypatch):
    # fp32 forwards have their own tilings: a target timing them on the 16-bit limits would time
    # one launch under every candidate's name
    monkeypatch.setattr(_rows, "_SMALL_TILES", False)
    target = tune_rows.TARGETS[name]
    assert target.ops
    marked = tune_rows.Candidate(target.get()._replace(max_rows=3), {})
    with target.replaced(marked):
        assert all(_rows.elementwise_limits(op.dtype, fp64_math=fp64_math) == marked.limits for op in target.ops)
    assert all(_rows.elementwise_limits(op.dtype, fp64_math=fp64_math) == target.get() for op in target.ops)


@pytest.mark.parametrize("rows", [8, 9])  # even tiles and a partial last tile
def test_the_softmax_numerics_diagnostics_launch_and_stay_near_production(rows):
    """The fp32 softmax diagnostics (fp64 sums, then the accurate exp too) launch the production
    kernel with dearer numerics: they must run, and land within a few fp32 ulps of production."""
    import kernels.softmax as softmax

    x = torch.randn(rows, 64, generator=torch.Generator().manual_seed(rows)).to(kernel_device_type())
    want = softmax._forward(x)
    variants = tune_rows._softmax_numerics(x)
    assert sorted(variants) == ["fp64sums", "fp64sums_accurate_exp"]
    for name, run in variants.items():
        got = run()
        assert torch.allclose(got, want, rtol=8 * torch.finfo(torch.float32).eps, atol=0), name


@pytest.mark.parametrize("name", sorted(tune_rows.TARGETS))
def test_every_target_varies_entries_of_its_tuning(name):
    """A target's limits, the entries its candidates go to and its knobs all name entries of the
    tuning it passes them into (a misspelt one would raise only on the GPU, mid-sweep)."""
    target = tune_rows.TARGETS[name]
    entries = set(target.tuning.defaults)
    assert {target.limits, *target.sets, *target.knobs.values(), *target.fixed} <= entries
    candidate = next(iter(tune_rows._candidates(target, target.ops[0].cols, target.ops[0].dtype.itemsize).values()))
    with target.replaced(candidate):
        for entry in target.sets:
            assert getattr(target.tuning, entry) == candidate.limits
    assert dict(target.tuning._values) == dict(target.tuning.defaults)
