"""A kernel module's tuning (``kernels/_tuning.py``): entries read at plan time, replaced for the
length of a with-block, with every plan built from other values forgotten on the way in and out."""

import threading

import pytest

from kernels import _launch
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
