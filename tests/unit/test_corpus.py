"""The failure corpus (``harness.corpus``): a counterexample found by a deep run is replayed first
by the next ci-profile run, until it passes."""

import json

import pytest
import torch
from hypothesis import settings

from harness import Dim, KernelSpec, TensorArg, corpus, profiles
from harness.device import current_device
from harness.runner import CheckFailure, PropertyRun


def _double(x):
    return x * 2


def _wrong_past_five(x):  # right on short inputs only: the ci profile's first case does not see it
    return x * 2 + (x.shape[-1] > 5)


def _spec(fn):
    return KernelSpec(name="corpus_demo", reference=_double, implementations={"torch": fn},
                      tensors=(TensorArg("x", dims=("n",)),), dims={"n": Dim(cpu_max=8, gpu_max=8)},
                      dtypes=("float32",))


@pytest.fixture
def profile():
    def use(name):
        profiles.load(name)
    yield use
    profiles.load("ci")


def _run(fn, max_examples):
    run = PropertyRun(_spec(fn), "torch", "float32", "forward", current_device(), max_examples=max_examples)
    run.run()
    return run


def test_a_failure_found_by_the_nightly_profile_is_replayed_first_by_the_next_ci_run(profile):
    profile("ci")
    _run(_wrong_past_five, max_examples=1)  # the ci profile alone misses the bug
    assert not list(corpus.entries())

    profile("nightly")
    with pytest.raises(CheckFailure):
        _run(_wrong_past_five, max_examples=60)
    (entry,) = corpus.entries("corpus_demo", "torch", "float32", "forward")
    assert entry.case.tensors["x"].shape[-1] > 5
    record = json.loads(entry.path.read_text())
    assert record["reason"] and record["check"] == "forward"

    profile("ci")
    with pytest.raises(CheckFailure) as again:  # replayed before any generated case
        _run(_wrong_past_five, max_examples=1)
    assert again.value.case == entry.case
    assert list(corpus.entries()) == [entry]  # still failing: kept

    _run(_double, max_examples=1)  # fixed: the case passes and leaves the corpus
    assert not list(corpus.entries())


def test_a_case_added_by_hand_is_replayed_and_an_unreadable_file_is_left_alone(profile, tmp_path):
    profile("ci")
    with pytest.raises(CheckFailure):
        _run(_wrong_past_five, max_examples=60)
    (found,) = corpus.entries()
    by_hand = tmp_path / "by-hand"
    by_hand.mkdir()
    found.path.rename(by_hand / "mine.json")
    broken = corpus.corpus_dir() / "broken.json"
    broken.write_text("{not json")
    with pytest.warns(UserWarning, match="cannot read"):
        assert list(corpus.entries()) == []
    (by_hand / "mine.json").rename(corpus.corpus_dir() / "mine.json")
    with pytest.warns(UserWarning), pytest.raises(CheckFailure):
        _run(_wrong_past_five, max_examples=1)
    assert broken.exists()
    assert settings.default.max_examples == 8


def test_the_cli_adds_a_case_by_hand_and_lists_the_corpus(capsys):
    from harness.cli import main

    case = ('{"dims": {"*batch": [], "rows": 2, "cols": 9}, "dtype": "float32", "grad_layout": "contiguous", '
            '"grad_seed": 0, "scalars": {}, "schema": 1, "spec": "softmax", "tensors": {"x": {"dtype": "float32", '
            '"layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0, "shape": [2, 9], '
            '"values": "normal"}}}')
    assert main(["corpus", "add", case, "--check", "backward"]) == 0
    (entry,) = corpus.entries("softmax", "triton", "float32", "backward")
    assert entry.reason == "added by hand"
    assert main(["corpus", "list"]) == 0
    assert "softmax[triton] backward (float32): added by hand" in capsys.readouterr().out
    assert main(["corpus", "add", "{not a case}"]) == 2


def test_each_check_draws_cases_of_its_own_reproducibly_under_the_ci_profile(profile):
    profile("ci")
    seen: dict[str, list] = {}

    def recording(check):
        def fn(x):
            seen.setdefault(check, []).append((tuple(x.shape), float(x.detach().abs().sum())))
            return x * 2
        return fn

    for check, label in (("forward", "forward"), ("unwritten", "unwritten"), ("forward", "forward again")):
        fn = recording(label)
        PropertyRun(_spec(fn), "torch", "float32", check, current_device()).run()
    assert seen["forward"] == seen["forward again"]  # reproducible
    assert seen["forward"] != seen["unwritten"]  # but not the same cases for every check
