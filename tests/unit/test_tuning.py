"""A kernel module's tuning (``kernels/_tuning.py``): entries read at plan time, replaced for the
length of a with-block, with every plan built from other values forgotten on the way in and out;
a GPU model's own measured entries over the ones given."""

import threading

import pytest

from kernels import _launch, _tuning
from kernels._tuning import Tuning


def test_replaced_values_hold_inside_the_block_alone_and_nest():
    tuning = Tuning("toy", tile=64, prefetch=None)
    with tuning.replaced(tile=128):
        assert (tuning.tile, tuning.prefetch) == (128, None)
        with tuning.replaced(prefetch=True):
            assert (tuning.tile, tuning.prefetch) == (128, True)
        assert tuning.prefetch is None
    assert (tuning.tile, tuning.prefetch) == (64, None) and dict(tuning.defaults) == {"tile": 64, "prefetch": None}


def test_a_replacement_is_seen_from_another_thread():
    """autograd plans a backward on its device thread: it must see the candidate passed in."""
    tuning, seen = Tuning("toy", tile=64), []
    with tuning.replaced(tile=128):
        worker = threading.Thread(target=lambda: seen.append(tuning.tile))
        worker.start()
        worker.join()
    assert seen == [128]


def test_every_change_forgets_the_plans_and_the_module_caches(monkeypatch):
    forgotten = []
    monkeypatch.setattr(_launch, "forget_plans", lambda: forgotten.append("plans"))
    tuning = Tuning("toy", forget=(lambda: forgotten.append("tiles"),), tile=64)
    tuning.forget_with(lambda: forgotten.append("configs"))
    with tuning.replaced(tile=128):
        assert forgotten == ["tiles", "configs", "plans"]
    assert forgotten == ["tiles", "configs", "plans"] * 2


def test_an_unknown_entry_is_named():
    tuning = Tuning("toy", tile=64)
    with pytest.raises(ValueError, match=r"toy tuning has no entries \['tiles'\]; its entries: \['tile'\]"):
        with tuning.replaced(tiles=128):
            pass
    with pytest.raises(AttributeError, match=r"toy tuning has no entry 'tiles'"):
        tuning.tiles
    assert tuning.tile == 64


def test_the_values_come_back_when_the_block_raises():
    tuning = Tuning("toy", tile=64)
    with pytest.raises(RuntimeError):
        with tuning.replaced(tile=128):
            raise RuntimeError("a candidate failed to compile")
    assert tuning.tile == 64


def test_a_gpu_model_measured_otherwise_reads_its_own_entries(monkeypatch):
    monkeypatch.setattr(_tuning, "gpu_name", lambda: "NVIDIA H200")
    tuning = Tuning("toy", devices={"H200": {"tile": 128}, "A100": {"tile": 32}}, tile=64, prefetch=None)
    assert (tuning.tile, tuning.prefetch) == (128, None)
    assert dict(tuning.defaults) == {"tile": 128, "prefetch": None}
    with tuning.replaced(prefetch=True):  # a sweep's candidate over the model's measured values
        assert (tuning.tile, tuning.prefetch) == (128, True)
    assert "replaced" not in repr(tuning)
    with tuning.replaced(tile=64):
        assert tuning.tile == 64 and "replaced: ['tile']" in repr(tuning)
    assert tuning.tile == 128


@pytest.mark.parametrize("name", [None, "NVIDIA H100 80GB HBM3"])
def test_another_gpu_or_none_reads_the_entries_given(monkeypatch, name):
    monkeypatch.setattr(_tuning, "gpu_name", lambda: name)
    tuning = Tuning("toy", devices={"H200": {"tile": 128}}, tile=64)
    assert tuning.tile == 64 and dict(tuning.defaults) == {"tile": 64}


def test_a_model_entry_the_tuning_lacks_is_named_at_construction():
    with pytest.raises(ValueError, match=r"toy tuning's entries for 'H200' name entries it does not have: "
                                         r"\['tiles'\]; its entries: \['tile'\]"):
        Tuning("toy", devices={"H200": {"tiles": 128}}, tile=64)


def test_two_models_matching_one_gpu_are_refused(monkeypatch):
    monkeypatch.setattr(_tuning, "gpu_name", lambda: "NVIDIA H200 NVL")
    tuning = Tuning("toy", devices={"H200": {"tile": 128}, "NVL": {"tile": 32}}, tile=64)
    with pytest.raises(ValueError, match=r"toy tuning has 2 sets of entries for the GPU 'NVIDIA H200 NVL'"):
        tuning.tile
