"""The generators really produce what the design promises: every layout class, the interesting
sizes, the hard values; and placed tensors really sit in guarded, canary-filled memory."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.case import TensorRecipe
from harness.layouts import GUARD_ELEMENTS, LAYOUT_CLASSES, Layout, place
from harness.spec import Dim
from harness.strategies import bucketed_sizes, interesting_sizes, layouts, sizes
from harness.values import generate_values


def test_every_layout_class_is_drawn():
    seen = set()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(layouts((3, 4, 5)))
    def collect(layout):
        seen.update(layout.classes())

    collect()
    assert seen == set(LAYOUT_CLASSES)


def test_mixed_layouts_are_drawn():
    mixed = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(layouts((3, 4)))
    def collect(layout):
        if len(layout.classes()) >= 3:
            mixed.append(layout)

    collect()
    assert mixed, "no layout combined three or more classes"


@pytest.mark.parametrize("cls", [c for c in LAYOUT_CLASSES])
def test_each_class_has_its_memory_signature(cls):
    values = torch.arange(12, dtype=torch.float64).reshape(3, 4) + 1
    layout = {
        "contiguous": Layout(),
        "permuted": Layout(perm=(1, 0)),
        "stepped": Layout(steps=(2, 3)),
        "offset": Layout(offset=5),
        "broadcast": Layout(expanded=(0,)),
    }[cls]
    placed = place(values, layout, torch.float32, "cpu")
    t = placed.tensor
    expected = values[0:1].expand(3, 4) if cls == "broadcast" else values
    assert torch.equal(t.double(), expected)
    if cls == "contiguous":
        assert t.is_contiguous()
    if cls == "permuted":
        assert t.stride() == (1, 3)
    if cls == "stepped":
        assert t.stride() == (24, 3)
        gaps = placed.base[placed.data_start : placed.data_start + placed.data_numel][~placed.data_mask[placed.data_start : placed.data_start + placed.data_numel]]
        assert gaps.numel() > 0 and bool(gaps.isnan().all()), "gaps must hold NaN canaries"
    if cls == "offset":
        assert t.storage_offset() == GUARD_ELEMENTS + 5
    if cls == "broadcast":
        assert t.stride()[0] == 0
    assert bool(placed.base[:GUARD_ELEMENTS].isnan().all()) and bool(placed.base[-GUARD_ELEMENTS:].isnan().all())


def test_guard_band_reports_out_of_bounds_writes_and_in_place_changes():
    placed = place(torch.ones(2, 3, dtype=torch.float64), Layout(steps=(1, 2)), torch.float16, "cpu")
    snap = placed.snapshot()
    assert placed.changes(snap) == []
    placed.base[GUARD_ELEMENTS + placed.data_numel] = 0  # one past the end
    placed.tensor[0, 0] = 5  # an in-place modification of the input
    placed.base[placed.data_start + 1] = 1  # a gap between strided elements
    report = "\n".join(placed.changes(snap))
    assert "guard band after" in report
    assert "input modified in place" in report
    assert "gaps between" in report


def test_changes_counts_each_region_and_orders_them_by_first_change():
    placed = place(torch.ones(2, 3, dtype=torch.float64), Layout(steps=(1, 2), offset=3), torch.float16, "cpu")
    snap = placed.snapshot()
    end = placed.data_start + placed.data_numel
    placed.base[end + 1] = 0  # after the end
    placed.base[GUARD_ELEMENTS + 1] = 0  # storage-offset padding
    placed.base[2] = 0  # the guard band before
    placed.tensor[1, :] = 5  # three of the tensor's own elements
    placed.base[placed.data_start + 1] = 1  # a gap between strided elements
    assert placed.changes(snap) == [
        "1 element(s) in guard band before the tensor (out-of-bounds write), first at buffer index 2",
        f"1 element(s) in storage-offset padding before the tensor (out-of-bounds write), first at buffer index "
        f"{GUARD_ELEMENTS + 1}",
        f"1 element(s) in gaps between the tensor's strided elements (write to memory it does not own), first at "
        f"buffer index {placed.data_start + 1}",
        f"3 element(s) in the tensor's own elements (input modified in place), first at buffer index "
        f"{placed.data_start + 2 * 3}",
        f"1 element(s) in guard band after the tensor (out-of-bounds write), first at buffer index {end + 1}",
    ]


def test_changes_of_an_input_written_whole_are_counted_without_a_step_per_element(monkeypatch):
    # a benchmark's third-party peer may overwrite a large input entirely (Liger-Kernel's SwiGLU
    # backward): the report must cost a few tensor operations, not one Python step per element
    placed = place(torch.zeros(256, 256, dtype=torch.float64), Layout(), torch.float32, "cpu")
    snap = placed.snapshot()
    placed.tensor.fill_(1.0)
    steps = []
    real_index = torch.Tensor.__getitem__
    monkeypatch.setattr(torch.Tensor, "__getitem__", lambda t, key: steps.append(key) or real_index(t, key))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: pytest.fail("changes() walked the elements in Python"))
    report = placed.changes(snap)
    assert report == [
        f"{256 * 256} element(s) in the tensor's own elements (input modified in place), first at buffer index "
        f"{placed.data_start}"]
    assert len(steps) < 20, f"{len(steps)} tensor indexing steps for one report"


def test_interesting_sizes_cover_primes_powers_and_block_boundaries():
    dim = Dim(cpu_max=200, gpu_max=5000, boundaries=lambda: (64,))
    cpu = interesting_sizes(dim, on_gpu=False)
    assert {1, 2, 3, 7, 31, 63, 64, 65, 127, 128, 129} <= set(cpu)
    assert max(cpu) <= 200
    gpu = interesting_sizes(dim, on_gpu=True)
    assert {4093, 4095, 4096, 4097} <= set(gpu) and max(gpu) <= 5000


def test_sizes_stay_within_the_backend_range():
    dim = Dim(cpu_max=10, gpu_max=100)

    @settings(max_examples=200, derandomize=True, database=None)
    @given(sizes(dim, on_gpu=False))
    def within(n):
        assert 1 <= n <= 10

    within()


def test_gpu_sizes_come_from_a_bounded_menu():
    """A GPU property run draws from a fixed menu (bounded Triton compilations), wide yet small."""
    dim = Dim(cpu_max=10, gpu_max=9000, boundaries=(1024,))
    menu = bucketed_sizes(dim)
    assert {1, 1023, 1024, 1025, 8191} <= set(menu) and max(menu) <= 9000 and len(menu) < 80
    assert any(n % 2 == 1 and n not in interesting_sizes(dim, on_gpu=True) for n in menu)  # grid points

    @settings(max_examples=300, derandomize=True, database=None)
    @given(sizes(dim, on_gpu=True))
    def on_the_menu(n):
        assert n in menu

    on_the_menu()


def test_choices_are_the_only_sizes_drawn():
    dim = Dim(cpu_max=64, gpu_max=128, choices=(16, 32, 64, 128))
    assert interesting_sizes(dim, on_gpu=False) == [16, 32, 64]

    @settings(max_examples=100, derandomize=True, database=None)
    @given(sizes(dim, on_gpu=False), sizes(dim, on_gpu=True))
    def chosen(cpu, gpu):
        assert cpu in (16, 32, 64) and gpu in (16, 32, 64, 128)

    chosen()


@pytest.mark.parametrize(
    "kind, predicate",
    [
        ("neg_inf_mask", lambda v: bool(v.isneginf().any()) and bool(v.isfinite().any())),
        ("masked_rows", lambda v: bool(v[0].isneginf().all()) and bool(v[1].isfinite().all())),
        ("constant_rows", lambda v: bool((v == v[:, :1]).all())),
        ("zero_rows", lambda v: bool((v[0] == 0).all())),
        ("huge", lambda v: float(v.abs().min()) > 1e3),
        ("mixed_scales", lambda v: float(v.abs().amax(1).max() / v.abs().amax(1).min()) > 10),
        ("repeated_tokens", lambda v: v.dtype == torch.int64 and len(set(v[0].tolist())) <= 3),
    ],
)
def test_value_kinds_produce_their_hard_cases(kind, predicate):
    values = generate_values(kind, (6, 40), seed=3)
    assert predicate(values)
    assert torch.equal(values.nan_to_num(), generate_values(kind, (6, 40), seed=3).nan_to_num()), "must be seeded"


def test_recipe_replays_bitwise_from_json():
    recipe = TensorRecipe((3, 5), "bfloat16", Layout(perm=(1, 0), steps=(2, 1), offset=3), "normal", 11)
    again = TensorRecipe.from_json(recipe.to_json())
    a, b = recipe.build("cpu").tensor, again.build("cpu").tensor
    assert a.stride() == b.stride() and torch.equal(a, b)


@given(st.integers(1, 4).flatmap(lambda r: st.tuples(*[st.integers(1, 4)] * r)).flatmap(
    lambda shape: st.tuples(st.just(shape), layouts(shape))))
@settings(max_examples=60, derandomize=True, database=None)
def test_any_drawn_layout_places_the_values_exactly(shape_and_layout):
    shape, layout = shape_and_layout
    values = torch.randn(shape, dtype=torch.float64)
    placed = place(values, layout, torch.float64, "cpu")
    expected = values
    for d in layout.expanded:
        expected = expected.narrow(d, 0, 1).expand_as(expected)
    assert placed.tensor.shape == values.shape
    assert torch.equal(placed.tensor, expected)
    assert placed.data_numel <= math.prod(s * 3 for s in shape)
